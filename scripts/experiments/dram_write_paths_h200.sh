#!/bin/bash
# One device call: the write-path probe, then Nsight Compute's DRAM and L2 write counters of
# its kernels.  bash scripts/experiments/dram_write_paths_h200.sh $OUT
set -u
OUT=${1:?OUT}
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw --format=csv > $OUT/smi.txt 2>&1
python3 scripts/experiments/dram_write_paths_h200.py $OUT/dram_write_paths_h200.json 2>&1 | tee $OUT/dram_write_paths.log
PROBE_ONCE=1 ncu --clock-control none --kernel-name tiles \
    --metrics gpu__time_duration.sum,dram__bytes_write.sum,dram__bytes_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_srcunit_tex_op_read.sum \
    --csv python3 scripts/experiments/dram_write_paths_h200.py /tmp/ncu_dummy.json > $OUT/dram_write_paths_ncu.csv 2>$OUT/ncu.err || true
tail -3 $OUT/ncu.err
