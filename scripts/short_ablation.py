"""The fragment-store charges one at a time: the validation's N 512 rows under
sustained_simulation (as `iosim validate`), and fast vs exact mode on tests/test_sim_modes.py's
problems, with the GPU config's figures switched off or on (the chip-wide rate 0.92 TB/s is in
no config: `l2` and `all+l2` switch it on). Run from the repository root:
python scripts/short_ablation.py"""
from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.clock import sustained_simulation
from iosim.sim import simulate

CHIP = 0.9205e12    # tests/test_store_layout.py CHIP_RATE
OFF = dict(fragment_store_issue_cycles_per_byte=None, cta_turnover_fragment_store_cycles=None)
VARIANTS = {"none": OFF,
            "issue": dict(cta_turnover_fragment_store_cycles=None),
            "turnover": dict(fragment_store_issue_cycles_per_byte=None),
            "l2": dict(OFF, l2_fragment_store_bandwidth_bytes_per_s=CHIP),
            "all": {},
            "all+l2": dict(l2_fragment_store_bandwidth_bytes_per_s=CHIP)}
ROWS = [("iosim-fa3-fwd-N512-d64-full", "fa3", dict(batch=32, heads_q=16, seq_q=512, head_dim=64),
         dict(block_q=192, block_kv=128, stages=2, warps=16), 122.0e-6),
        ("iosim-fa3-fwd-N512-d128-full", "fa3", dict(batch=32, heads_q=16, seq_q=512, head_dim=128),
         dict(block_q=128, block_kv=128, stages=3, warps=12), 177.2e-6),
        ("iosim-fa2-fwd-N512-d64-full", "fa2", dict(batch=32, heads_q=16, seq_q=512, head_dim=64),
         dict(block_q=128, block_kv=128, stages=2, warps=4), 139.4e-6)]
def variant(g, name):
    upd = dict(VARIANTS[name])
    if "l2_fragment_store_bandwidth_bytes_per_s" in upd:
        upd["sources"] = {**g.sources, "l2_fragment_store_bandwidth_bytes_per_s":
                          "measurements/h200/store_layout/store_layout_h200.json (experiment)"}
    return g.model_copy(update=upd)


base = load_gpu("h200-calibrated")
print("time error vs measured (validation rows, h200-calibrated):")
for rid, algo, kw, til, meas in ROWS:
    s = build_schedule(AttentionProblem(**kw), base, algo, **til)
    out = []
    for name, upd in VARIANTS.items():
        r, _ = sustained_simulation(s, variant(base, name), l2_protocol="ncu", time_protocol="warm")
        out.append(f"{name} {r.time_s / meas - 1:+.1%}")
    print(f"  {rid:32s} " + " | ".join(out))
print("fast / exact - 1 (h100, tests/test_sim_modes.py problems):")
h100 = load_gpu("h100")
for algo, seq, heads, causal in [("fa2", 1024, 8, False), ("fa2", 256, 32, False), ("fa1", 1024, 8, False),
                                 ("fa3", 256, 32, False)]:
    out = []
    for name in ("none", "all", "all+l2"):
        g = variant(h100, name)
        s = build_schedule(AttentionProblem(seq_q=seq, heads_q=heads, causal=causal), g, algo)
        f, e = simulate(s, g, "fast", exact_below_events=0), simulate(s, g, "exact")
        out.append(f"{name} {f.time_s / e.time_s - 1:+.2%}")
    print(f"  {algo} N {seq} H {heads} causal {causal}: " + " | ".join(out))
