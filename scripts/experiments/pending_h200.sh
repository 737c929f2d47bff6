#!/usr/bin/env bash
# The device experiments written but not yet run, in one H200 call (each under its own limit,
# so one that hangs does not cost the others). From the repository root on the device:
#
#   bash scripts/experiments/pending_h200.sh "$OUT"
#
# after installing the carried wheels (`python3 -m pip install -q --no-index --no-deps --target
# /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD`, carry [".whl"]). Writes into OUT:
#   l2_sharing_probe_h200.csv / .log   L2 read and dirty-line retention by pattern (ncu; decides
#                                      the write-back rule, docs/validation.md "DRAM bytes")
#   fa3_phase_stamps_h200.json / .log  FA-3's KV step per consumer, eight clock64 points per step
#                                      (the d 64 first-step gap, docs/validation.md mechanism table)
#   softmax_variants_h200.json / .log  standard attention's softmax kernel by variant
#                                      (measurements/h200/softmax/README.md)
# Expected wall time: ~6-8 minutes in all (probe ~3, stamps ~2, softmax ~2). The probe source
# compiles with nvcc -arch=sm_90 here (checked without a GPU); the run itself has not been made.
set -u
out="${1:?usage: pending_h200.sh OUT_DIR}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$out/smi_before.txt" 2>&1
timeout 240 python3 scripts/experiments/l2_sharing_probe_h200.py "$out/l2_sharing_probe_h200.csv" \
    > "$out/l2_sharing_probe_h200.log" 2>&1; echo "l2 sharing probe rc $?"
timeout 150 python3 scripts/experiments/fa3_phase_stamps_h200.py "$out/fa3_phase_stamps_h200.json" \
    > "$out/fa3_phase_stamps_h200.log" 2>&1; echo "fa3 phase stamps rc $?"
timeout 150 python3 scripts/softmax_variants_h200.py -o "$out/softmax_variants_h200.json" \
    > "$out/softmax_variants_h200.log" 2>&1; echo "softmax variants rc $?"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$out/smi_after.txt" 2>&1
tail -n 5 "$out"/*.log
