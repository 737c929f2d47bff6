#!/usr/bin/env bash
# One H200 call: the shared-sector merge-window probe (scripts/experiments/tma_gap_h200.py):
#
#   bash scripts/experiments/tma_gap_h200.sh "$OUT"
set -u
out="${1:?usage: tma_gap_h200.sh OUT_DIR}"
p=scripts/experiments/tma_gap_h200.py
timeout 120 python3 $p table "$out/tma_gap_h200.json" > "$out/tma_gap.log" 2>&1; echo "table rc $?"
m=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_write.sum,gpu__time_duration.sum
for g in 0 8 32 64 132 264 528 1056 2112 4224; do
  echo "== $g" >> "$out/tma_gap_ncu.txt"
  timeout 60 ncu --clock-control none --metrics $m --csv -k regex:"tma_" python3 $p one $g >> "$out/tma_gap_ncu.txt" 2>&1
done; echo "ncu done"
cat "$out/tma_gap.log"
grep -E "^==|dram__bytes_read|gpu__time" "$out/tma_gap_ncu.txt" | awk -F'","' '/^==/{print; next}{print $(NF-3), $NF}'
