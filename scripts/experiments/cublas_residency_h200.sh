#!/bin/bash
# One device call: the align1 residency probe (cublas_residency_h200.py).
#   bash scripts/experiments/cublas_residency_h200.sh $OUT
out=${1:?usage: cublas_residency_h200.sh OUTDIR}
cd "$(dirname "$0")" || exit 2
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$out/smi.txt"
python3 cublas_residency_h200.py "$out/cublas_residency_h200.json" > "$out/cublas_residency_h200.log" 2>&1
rc=$?
cat "$out/cublas_residency_h200.log" | cut -c1-160
exit $rc
