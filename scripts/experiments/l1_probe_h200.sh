#!/usr/bin/env bash
# The L1 probe (scripts/experiments/l1_probe_h200.py) under Nsight Compute: L1 counters of its
# cp.async.ca copies and the shared-memory configuration of every launch, then the table.
#   bash scripts/experiments/l1_probe_h200.sh OUTDIR
set -e
d=$(cd "$(dirname "$0")" && pwd)
ncu --clock-control none --kernel-name l1_probe \
    --metrics "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_access.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_access_lookup_hit.sum,launch__shared_mem_config_size,launch__grid_size,launch__shared_mem_per_block_dynamic" \
    --csv --page raw --print-units base --log-file "$1/l1_probe_ncu.csv" \
    python3 "$d/l1_probe_h200.py" "$1/l1_probe_launches.json"
python3 "$d/l1_probe_table.py" "$1/l1_probe_launches.json" "$1/l1_probe_ncu.csv" | tee "$1/l1_probe_table.txt"
