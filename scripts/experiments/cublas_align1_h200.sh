#!/bin/bash
# One device call: the align1 table (odd N: cuBLAS's cutlass_75 kernels), then Nsight Compute
# on five of its shapes.   bash scripts/experiments/cublas_align1_h200.sh $OUT
out=${1:?usage: cublas_align1_h200.sh OUTDIR}
cd "$(dirname "$0")" || exit 2
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$out/smi.txt"
python3 cublas_align2_h200.py --odd "$out/cublas_align1_h200.json" > "$out/cublas_align1_h200.log" 2>&1
m=dram__bytes_read.sum,dram__bytes_write.sum,l1tex__m_xbar2l1tex_read_bytes.sum,lts__t_bytes.sum,gpu__time_duration.sum
m=$m,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem
m=$m,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,launch__block_size,launch__grid_size,sm__cycles_active.avg
for f in "qk 2997 128" "qk 2997 32" "pv 2997 128" "pv 2997 64" "pt 2997 128"; do
  echo "## $f"
  ncu --clock-control none --kernel-name regex:'Kernel2|gemm|nvjet' --metrics $m --csv \
      --page raw --print-units base python3 cublas_align2_h200.py --one $f 2>&1 | grep -v '^==PROF=='
done > "$out/cublas_align1_ncu.csv"
tail -25 "$out/cublas_align1_h200.log"
