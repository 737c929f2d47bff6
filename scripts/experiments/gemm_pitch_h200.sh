#!/usr/bin/env bash
# One H200 call: the odd-N GEMM / row-pitch probe (scripts/experiments/gemm_pitch_h200.py) and
# the odd-N standard-attention rows (measurements/h200/oddn/sweep_oddn.yaml), from the repo root
# after installing the carried wheels (PYTHONPATH=/tmp/site:$PWD):
#
#   bash scripts/experiments/gemm_pitch_h200.sh "$OUT"
set -u
out="${1:?usage: gemm_pitch_h200.sh OUT_DIR}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv > "$out/smi_before.txt" 2>&1
p=scripts/experiments/gemm_pitch_h200.py
timeout 150 python3 $p gemm "$out/gemm_pitch_h200.json" > "$out/gemm_pitch.log" 2>&1; echo "gemm rc $?"
timeout 60 python3 $p store "$out/store_pitch_h200.json" >> "$out/gemm_pitch.log" 2>&1; echo "store rc $?"
m=dram__bytes_read.sum,dram__bytes_write.sum,l1tex__m_xbar2l1tex_read_bytes.sum,lts__t_bytes.sum,lts__t_sectors_op_write.sum,gpu__time_duration.sum
for a in "qk 3008 24 64" "qk 3072 23 64" "qk 2944 25 64" "qk 3000 16 64" "pv 3000 16 64" "pv 3072 23 64" "qk 5000 9 128" "qk 5120 8 128" "store 3000 24 0" "store 3072 23 0"; do
  echo "== $a" >> "$out/gemm_pitch_ncu.txt"
  timeout 60 ncu --clock-control none --metrics $m --csv -k regex:"nvjet|tile_store|gemm|cutlass" \
      python3 $p one $a >> "$out/gemm_pitch_ncu.txt" 2>&1
done; echo "ncu done"
export IOSIM_SWEEP=measurements/h200/oddn/sweep_oddn.yaml
timeout 120 python3 -m iosim.measure.sweep time "$out/times_oddn.csv" > "$out/oddn.log" 2>&1; echo "oddn time rc $?"
timeout 150 python3 -m iosim.measure.sweep ncu "$out/times_oddn.csv" "$out/measured_h200_oddn.csv" \
    "$out/ncu_raw_oddn.txt" "$out/measured_h200_oddn_kernels.csv" >> "$out/oddn.log" 2>&1; echo "oddn ncu rc $?"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$out/smi_after.txt" 2>&1
grep -E "^d|^store" "$out/gemm_pitch.log" | tail -80
tail -3 "$out/oddn.log"
