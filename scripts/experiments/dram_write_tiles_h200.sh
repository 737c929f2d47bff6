#!/bin/bash
# One device call: the tile-write probe, then ncu's DRAM write bytes of two of its shapes, and
# the write-only stream for reference.  bash scripts/experiments/dram_write_tiles_h200.sh $OUT
set -u
OUT=${1:?OUT}
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw --format=csv > $OUT/smi.txt 2>&1
python3 scripts/experiments/dram_write_tiles_h200.py $OUT/dram_write_tiles_h200.json 2>&1 | tee $OUT/dram_write_tiles.log
python3 -m iosim.measure.dram_stream -o $OUT/dram_stream_h200.json > $OUT/dram_stream.log 2>&1 || true
