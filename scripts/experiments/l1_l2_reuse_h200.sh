#!/bin/bash
# One device call, four probes of what the caches keep (none is a validation shape):
#  1. l2_reuse_probe.py: a tile read once, then again after a chosen distance of other reads
#     (the curve a stack-distance L2 needs; Nsight Compute's DRAM bytes);
#  1b. l2_hot_dirty_probe.py: O-like stores amid a clean stream and hits on a small hot set (do
#     hits shorten how long other lines stay dirty?);
#  2. the standard softmax alone on its scalar path (odd N, B 1 H 16) at its own occupancy and
#     padded to 2 and 4 CTAs per SM: requested sectors, L1 lookup hits, L2 -> SM bytes (the
#     trip-boundary sectors the L1 keeps, softmax_code.copy_kept);
#  3. cuBLAS's align1 GEMMs (odd N), and three align2 P V kernels (one and two CTAs per SM), with the same L1 metrics (their L2 -> SM bytes are below
#     their panels' bytes: does the L1 serve some of the panel loads?).
#     bash scripts/experiments/l1_l2_reuse_h200.sh $OUT
out=${1:?usage: l1_l2_reuse_h200.sh OUTDIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
export PYTHONUNBUFFERED=1 PYTHONPATH=$root${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$out/smi.txt"
{
  echo "## l2 reuse"
  timeout 300 python3 scripts/experiments/l2_reuse_probe.py "$out/l2_reuse_probe.csv" 2>&1 | tail -90
  echo "## l2 hot dirty"
  timeout 150 python3 scripts/experiments/l2_hot_dirty_probe.py "$out/l2_hot_dirty_probe.csv" 2>&1 | tail -20
} > "$out/log.txt" 2>&1
m=l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum
m=$m,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_miss.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
m=$m,l1tex__m_xbar2l1tex_read_bytes.sum,gpu__time_duration.sum,launch__grid_size,launch__block_size
m=$m,launch__occupancy_limit_shared_mem,launch__shared_mem_config_size,launch__shared_mem_per_block_dynamic
m=$m,launch__occupancy_limit_registers,sm__warps_active.avg.per_cycle_active
echo "## softmax scalar" >> "$out/log.txt"
timeout 240 ncu --clock-control none --csv --page raw --print-units base --metrics $m -k std_softmax \
    python3 scripts/experiments/softmax_issue_h200.py --ncu --ncu-seqs 1003,1501,2001,2501,3001,3499,4001,5001,6001 \
    --ncu-ctas 0,2,4 > "$out/softmax_scalar_sectors_ncu.csv" 2>> "$out/log.txt"
echo "## align1" >> "$out/log.txt"
cd scripts/experiments || exit 2
for f in "qk 2997 128" "qk 2997 64" "qk 4003 128" "pv 2997 128" "pt 2997 128" "pv 2996 128" "pv 2996 64" "pv 6006 128"; do
  echo "## $f"
  timeout 60 ncu --clock-control none --kernel-name regex:'Kernel2|gemm|nvjet' --metrics $m --csv \
      --page raw --print-units base python3 cublas_align2_h200.py --one $f 2>&1 | grep -v '^==PROF=='
done > "$out/align1_l1_ncu.csv"
tail -5 "$out/align1_l1_ncu.csv" >> "$out/log.txt"
grep -c '"std_softmax"' "$out/softmax_scalar_sectors_ncu.csv" >> "$out/log.txt"
cat "$out/log.txt" | tail -60
