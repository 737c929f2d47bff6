#!/usr/bin/env bash
# One H200 call: cuBLAS S = Q K^T's shared-sector misses by matrix count
# (scripts/experiments/cublas_rmw_h200.py):   bash scripts/experiments/cublas_rmw_h200.sh "$OUT"
set -u
out="${1:?usage: cublas_rmw_h200.sh OUT_DIR}"
p=scripts/experiments/cublas_rmw_h200.py
timeout 120 python3 $p names "$out/cublas_rmw_h200.json" > "$out/cublas_rmw.log" 2>&1; echo "names rc $?"
m=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_write.sum,gpu__time_duration.sum
for n in 3000 3008; do for z in 1 2 4 8 16 24 32 48; do
  echo "== $n $z" >> "$out/cublas_rmw_ncu.txt"
  timeout 60 ncu --clock-control none --metrics $m --csv -k regex:"nvjet|gemm|Kernel2" python3 $p one $n $z >> "$out/cublas_rmw_ncu.txt" 2>&1
done; done; echo "ncu done"
cat "$out/cublas_rmw.log" | grep -v Warn
grep -E "^==|dram__bytes_read|dram__bytes_write|gpu__time" "$out/cublas_rmw_ncu.txt" | awk -F'","' '/^==/{print; next}{print $(NF-3), $NF}'
