#!/bin/bash
# One device call: cuBLAS's S kernels at K = 16 / 64 / 128 across N (their tiles), CUDA events,
# then the same points under Nsight Compute (gpu__time_duration).
#   bash scripts/experiments/cublas_epilogue_tiles_h200.sh $OUT
set -u
OUT=${1:?OUT}
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw --format=csv > $OUT/smi.txt 2>&1
python3 scripts/experiments/cublas_epilogue_tiles_h200.py $OUT/cublas_epilogue_tiles_h200.json 2>&1 | tee $OUT/cublas_epilogue_tiles.log
ncu --clock-control none --kernel-name regex:nvjet\|gemm\|cutlass \
    --metrics gpu__time_duration.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,sm__cycles_elapsed.avg.per_second \
    --csv python3 scripts/experiments/cublas_epilogue_tiles_h200.py /tmp/ncu_dummy.json --ncu > $OUT/cublas_epilogue_tiles_ncu.csv 2>$OUT/ncu.err || true
tail -3 $OUT/ncu.err
wc -l $OUT/cublas_epilogue_tiles_ncu.csv
