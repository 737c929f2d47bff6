#!/bin/bash
# Issue 12's device call: the SM clock under sustained load per kind of work, then the widened
# sweep (iosim/data/validation/sweep_wide.yaml): CUDA-event times, then one ncu run for bytes.
# Run from the repository root on the H200 with OUT set; results under $OUT.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
timeout 60 python3 -m iosim.measure.clocks "$OUT/clocks_h200.json" 2.0 > "$OUT/clocks.log" 2>&1; tail -3 "$OUT/clocks.log"
export IOSIM_SWEEP=iosim/data/validation/sweep_wide.yaml
timeout 150 python3 -m iosim.measure.sweep time "$OUT/times_wide.csv" 2>&1 | tail -40
timeout 110 python3 -m iosim.measure.sweep ncu "$OUT/times_wide.csv" "$OUT/measured_h200_wide.csv" "$OUT/ncu_raw_wide.txt" "$OUT/measured_h200_wide_kernels.csv" 2>&1 | tail -5
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/clocks_h200.json"))
for k, v in d.items():
    if isinstance(v, dict):
        print(k, {x: v.get(x) for x in ("flops_per_s", "sm_clock_mhz_median", "power_w_median", "exp_per_clock_per_sm_by_events", "tensor_flops_per_s", "error")})
PY
[ -f "$OUT/measured_h200_wide.csv" ] || cp "$OUT/times_wide.csv" "$OUT/measured_h200_wide.csv"
