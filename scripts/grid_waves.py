"""Per-wave cost of the project's FA-3 forward at N 512: the measured kernel time
(CUDA events, median of 10, two runs; measurements/h200/grid/grid_times_run*.csv, produced by
`IOSIM_SWEEP=measurements/h200/grid/sweep_grid.yaml python3 -m iosim.measure.sweep time OUT.csv`)
against the model's (exact mode, h200-calibrated as validation uses) at grids of 1/4 .. 15.5
waves of 132 CTAs. The per-wave slope between the larger grids is each CTA slot's time in the
steady state, free of the op's fixed floor (~20 us at one CTA: host work inside the events).
Run from the repository root: python scripts/grid_waves.py"""
import csv, sys
from iosim.algorithms import build_schedule
from iosim.hardware import load_gpu
from iosim.problem import AttentionProblem
from iosim.sim import simulate

mode = sys.argv[1] if len(sys.argv) > 1 else "exact"
runs = [list(csv.DictReader(open(f"measurements/h200/grid/grid_times_run{r}.csv"))) for r in (1, 2)]
gpu = load_gpu("h200-calibrated")
rows = []
for a, b in zip(*runs):
    p = AttentionProblem(batch=int(a["batch"]), heads_q=1, heads_kv=1, seq_q=512, seq_kv=512,
                         head_dim=int(a["head_dim"]), dtype="fp16", causal=False, direction="fwd")
    s = build_schedule(p, "h200", "fa3")
    ctas = s.kernels[0].launch.grid[0] * s.kernels[0].launch.grid[1] * s.kernels[0].launch.grid[2]
    meas = sorted([float(a["time_s"]), float(b["time_s"])])[0]
    model = simulate(s, gpu, mode=mode).time_s
    rows.append((int(a["head_dim"]), ctas, meas * 1e6, model * 1e6))
print(f"mode {mode}\n  d  CTAs  waves  meas_us  model_us   err | slope per wave: meas  model  (us)")
prev = None
for d, c, m, s in rows:
    sl = ""
    if prev and prev[0] == d and prev[1] >= 264:
        w = (c - prev[1]) / 132
        sl = f"   {(m - prev[2]) / w:6.2f} {(s - prev[3]) / w:6.2f}"
    print(f"{d:3d} {c:5d} {c/132:6.2f} {m:8.1f} {s:9.1f} {s/m-1:+6.1%} |{sl}")
    prev = (d, c, m, s)
