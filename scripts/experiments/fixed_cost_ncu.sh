#!/bin/bash
# One device call: (1) the fixed-cost probe's shapes timed by Nsight Compute (kernel durations,
# no launch) and again by CUDA events in the same session, plus an empty kernel's CUDA-event
# time (what the events' launch adds to any kernel); (2) the L2 rewrite probe
# (l2_rewrite_probe.py: does a hot set rewritten many times push other dirty lines out?).
#   bash scripts/experiments/fixed_cost_ncu.sh $OUT
out=${1:?usage: fixed_cost_ncu.sh OUTDIR}
cd "$(dirname "$0")/../.." || exit 2
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$out/smi.txt"
py=scripts/experiments/cta_fixed_cost_h200.py
timeout 200 ncu --clock-control none --kernel-name 'regex:fa2_fwd|fa3_fwd' \
    --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,sm__cycles_active.avg,dram__bytes_read.sum,dram__bytes_write.sum \
    --csv --page raw --print-units base python3 $py --ncu > "$out/cta_fixed_cost_ncu.csv" 2> "$out/cta_fixed_cost_ncu.err"
timeout 120 python3 $py "$out/cta_fixed_cost_events.json" > "$out/cta_fixed_cost_events.log" 2>&1
timeout 60 python3 - "$out/empty_kernel_events.json" <<'PY' > "$out/empty_kernel.log" 2>&1
import json, sys
import cupy as cp
from iosim.measure.timing import time_op
k = cp.RawKernel('extern "C" __global__ void empty(int* x) { if (x[0] == 12345) x[0] = 1; }', "empty")
x = cp.zeros(1, dtype=cp.int32)
res = {}
for grid in (1, 132, 2048):
    res[grid] = time_op(lambda _k: k((grid,), (128,), (x,)), 1, warmup=10, repeat=50)
json.dump(res, open(sys.argv[1], "w"), indent=1)
print(res)
PY
mkdir -p "$out/l2_rewrite"
timeout 200 python3 scripts/experiments/l2_rewrite_probe.py "$out/l2_rewrite/l2_rewrite_probe.csv" > "$out/l2_rewrite/l2_rewrite_probe.log" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> "$out/smi.txt"
tail -5 "$out/cta_fixed_cost_ncu.err"; grep -c fa "$out/cta_fixed_cost_ncu.csv"; cat "$out/empty_kernel.log"; cat "$out/l2_rewrite/l2_rewrite_probe.log"
