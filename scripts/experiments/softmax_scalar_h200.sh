#!/bin/bash
# One device call: the softmax kernel's scalar path (softmax_scalar_h200.py), its SASS, and
# Nsight Compute at N 4001 / 4008 (the scalar and the 16-byte path, same grid).
#   bash scripts/experiments/softmax_scalar_h200.sh OUT_DIR
set -u
OUT=${1:?out dir}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,driver_version --format=csv > "$OUT/smi.txt" 2>&1
python3 scripts/experiments/softmax_scalar_h200.py --sass "$OUT/softmax_sass.txt" > "$OUT/sass.log" 2>&1 || echo "sass failed" 
python3 scripts/experiments/softmax_scalar_h200.py "$OUT/softmax_scalar_h200.json" 2>&1 | tee "$OUT/softmax_scalar.log"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,smsp__inst_executed.sum
for n in 4001 4008; do
  ncu --clock-control none --kernel-name std_softmax --metrics $M --csv \
    python3 scripts/experiments/softmax_scalar_h200.py --ncu $n > "$OUT/ncu_$n.csv" 2> "$OUT/ncu_$n.err"
done
tail -n 3 "$OUT"/ncu_*.csv | cut -c1-300
grep -c "LDG" "$OUT/softmax_sass.txt" 2>/dev/null
