"""Fast mode against exact mode's DRAM bytes at every L2 size (issue 11: monotone and within 2%).

FA-2 forward, batch 1, 32 heads, d 128, fp16, on the H100 config with only
`l2_capacity_bytes` changed (as check 08-core-l2-monotone builds them): N = 65,536 at
L2 = 10/20/30/40/60/80 MiB and N = 16,384 at 4/8 MiB. Exact mode is the reference; its
results are slow (minutes per point), so they are kept in a JSON cache keyed by the point
(--cache). Entries carry the fingerprint of the exact engine's sources and the GPU spec they
were computed under (exact_fingerprint.py); the output names the entries whose fingerprint is
missing or differs (stale: the cost model, the schedule or the engine changed since), and
--refresh-stale recomputes them (minutes per point).

    python benchmarks/sim_l2_sizes.py [--cache benchmarks/results/sim_l2_sizes_exact.json]
                                      [--only-exact] [--only-fast]

Output committed in benchmarks/results/sim_l2_sizes.txt (`--only-fast` after the exact cache
benchmarks/results/sim_l2_sizes_exact.json was filled by `--only-exact`).
"""
from __future__ import annotations

import argparse
import json
import os
import time

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.sim import simulate

from exact_fingerprint import exact_fingerprint

POINTS = [(65536, mib) for mib in (10, 20, 30, 40, 60, 80)] + [(16384, 4), (16384, 8)]


def point_key(seq: int, mib: int) -> str:
    return f"fa2 fwd B1 H32 d128 N{seq} h100 L2={mib}MiB"


def dram(result) -> float:
    return result.dram_read_bytes + result.dram_write_bytes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default="benchmarks/results/sim_l2_sizes_exact.json")
    ap.add_argument("--only-exact", action="store_true", help="fill the exact cache only")
    ap.add_argument("--only-fast", action="store_true", help="fast mode only (no exact runs)")
    ap.add_argument("--seqs", default="", help="comma-separated subset of N")
    ap.add_argument("--mibs", default="", help="comma-separated subset of L2 sizes (MiB)")
    ap.add_argument("--refresh-stale", action="store_true",
                    help="recompute cached exact results of another fingerprint")
    args = ap.parse_args(argv)
    cache = json.load(open(args.cache)) if os.path.exists(args.cache) else {}
    seqs = {int(s) for s in args.seqs.split(",") if s}
    mibs = {int(s) for s in args.mibs.split(",") if s}
    base = load_gpu("h100")
    print("# iosim: fast (default) vs exact DRAM bytes (read + write, final flush included), "
          "fa2 fwd B1 H32 d128 fp16, h100 with l2_capacity_bytes changed")
    print(f"{'N':>6s} {'L2_MiB':>6s} {'exact_GB':>9s} {'fast_GB':>9s} {'err':>8s} "
          f"{'fast_cpu_s':>11s} {'R':>4s} {'replayed_ctas':>13s}")
    prev = {}
    rows, stale = [], []
    for seq, mib in POINTS:
        if (seqs and seq not in seqs) or (mibs and mib not in mibs):
            continue
        gpu = base.with_(l2_capacity_bytes=mib * 2**20)
        schedule = build_schedule(AttentionProblem(seq_q=seq, heads_q=32, head_dim=128), gpu,
                                  "fa2")
        key = point_key(seq, mib)
        fingerprint = exact_fingerprint(gpu)
        fresh = key in cache and cache[key].get("fingerprint") == fingerprint
        if key in cache and not fresh:
            stale.append(key)
        if (key not in cache or (not fresh and args.refresh_stale)) and not args.only_fast:
            t0 = time.process_time()
            ex = simulate(schedule, gpu, "exact")
            cache[key] = {"dram_bytes": dram(ex), "time_s": ex.time_s,
                          "cpu_s": time.process_time() - t0, "fingerprint": fingerprint}
            with open(args.cache, "w") as f:
                json.dump(cache, f, indent=1, sort_keys=True)
        if args.only_exact:
            print(f"{seq:6d} {mib:6d} {cache[key]['dram_bytes'] / 1e9:9.4f}", flush=True)
            continue
        t0 = time.process_time()
        fast = simulate(schedule, gpu)
        wall = time.process_time() - t0
        ex_b = cache[key]["dram_bytes"] if key in cache else float("nan")
        f_b = dram(fast)
        err = (f_b - ex_b) / ex_b
        mono = "" if seq not in prev or f_b <= prev[seq] * 1.0 + 1e-9 * f_b else "  (rises)"
        prev[seq] = f_b
        rows.append(err)
        print(f"{seq:6d} {mib:6d} {ex_b / 1e9:9.4f} {f_b / 1e9:9.4f} {err:+8.2%} {wall:11.2f} "
              f"{fast.model.get('l2_set_sampling_ratio', 1):4d} "
              f"{str(fast.model.get('l2_simulated_ctas', '')):>13s}{mono}", flush=True)
    if rows:
        print(f"# max |err| {max(abs(e) for e in rows):.2%}; exact mode from {args.cache} "
              f"(cpu_s there: {sum(v.get('cpu_s', 0) for v in cache.values()):.0f} s in all)")
    if stale:
        print(f"# {len(stale)} cached exact results of another (or no) engine fingerprint "
              f"{'recomputed' if args.refresh_stale else '(stale: --refresh-stale recomputes)'}: "
              + ", ".join(stale))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
