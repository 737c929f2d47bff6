#!/usr/bin/env bash
# One H200 call: the TMA store / load pitch probe (scripts/experiments/tma_pitch_h200.py), from
# the repo root:
#
#   bash scripts/experiments/tma_pitch_h200.sh "$OUT"
set -u
out="${1:?usage: tma_pitch_h200.sh OUT_DIR}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv > "$out/smi_before.txt" 2>&1
p=scripts/experiments/tma_pitch_h200.py
timeout 120 python3 $p store "$out/tma_store_h200.json" > "$out/tma_pitch.log" 2>&1; echo "store rc $?"
timeout 60 python3 $p load "$out/tma_load_h200.json" >> "$out/tma_pitch.log" 2>&1; echo "load rc $?"
m=dram__bytes_read.sum,dram__bytes_write.sum,l1tex__m_xbar2l1tex_read_bytes.sum,lts__t_bytes.sum,lts__t_sectors_op_write.sum,lts__t_requests_op_write.sum,gpu__time_duration.sum
python3 - <<'PY' > "$out/cases.txt"
import sys; sys.path.insert(0, "scripts/experiments")
from tma_pitch_h200 import STORES, LOADS
for c in STORES + LOADS: print(*c)
PY
while read -r a; do
  echo "== $a" >> "$out/tma_pitch_ncu.txt"
  timeout 60 ncu --clock-control none --metrics $m --csv -k regex:"tma_|plain_" \
      python3 $p one $a >> "$out/tma_pitch_ncu.txt" 2>&1
done < "$out/cases.txt"; echo "ncu done"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$out/smi_after.txt" 2>&1
cat "$out/tma_pitch.log" | grep -v Warn
grep -E "^==|gpu__time|dram__bytes_write|xbar2l1tex" "$out/tma_pitch_ncu.txt" | awk -F'","' '/^==/{print; next}{print $(NF-3), $NF}' | head -150
