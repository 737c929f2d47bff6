#!/bin/bash
# One device call (issue 12, mma.sync family): the mma.sync + ldmatrix microbenchmark, torch
# flash's launch figures under Nsight Compute, and the SASS of the benchmark as built there.
# Run from the repository root on the H200; writes under $OUT.
set -o pipefail
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv,noheader | tee $OUT/smi.txt
python3 -m iosim.measure.microbench --only-mma-ldsm -o $OUT/mma_ldsm_h200.json 2>&1 | tee $OUT/mma_ldsm_h200.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv,noheader | tee -a $OUT/smi.txt $OUT/mma_ldsm_h200.log
python3 -c "from iosim.measure.microbench import _MMA_LDSM_SRC; open('/tmp/mma_ldsm.cu','w').write(_MMA_LDSM_SRC)"
nvcc -cubin -arch=sm_90 -std=c++17 -o /tmp/mma_ldsm.cubin /tmp/mma_ldsm.cu && cuobjdump -sass /tmp/mma_ldsm.cubin > $OUT/mma_ldsm_sm90.sass
timeout 150 ncu --clock-control none -k regex:flash -c 30 --metrics launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__occupancy_limit_warps,launch__occupancy_limit_blocks,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum --csv python3 scripts/torch_flash_launch.py > $OUT/torch_flash_launch_ncu.csv 2> $OUT/torch_flash_launch_ncu.err
tail -3 $OUT/torch_flash_launch_ncu.err
python3 - <<'PY'
import csv, os
rows = list(csv.reader(open(os.environ["OUT"] + "/torch_flash_launch_ncu.csv")))
hdr = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
if hdr is not None:
    h = rows[hdr]
    by = {}
    for r in rows[hdr + 1:]:
        d = dict(zip(h, r))
        by.setdefault((d["ID"], d.get("Kernel Name", "")[:48]), {})[d["Metric Name"].replace("launch__", "")] = d["Metric Value"]
    for (i, name), m in by.items():
        print(i, name, " ".join(f"{k}={v}" for k, v in sorted(m.items())))
PY
