"""Fast mode against exact mode on randomly drawn problems (seeded): predicted time and DRAM
bytes, their relative differences, and the distribution the problems were drawn from.

Each problem draws an algorithm, sequence lengths (log-uniform; seq_kv = seq_q or drawn
apart), heads (query heads and a KV-head divisor for GQA), batch, head dimension, causal
masking and direction (backward only where the algorithm has one). Problems outside
[--min-events, --max-events] tile ops are drawn again: above the minimum (the default
mode's threshold for simulating exactly) the default mode runs its aggregated engine, and
below the maximum exact mode stays affordable. `err_t`, `err_dram`: the default mode against
exact mode.

    python benchmarks/sim_random_problems.py [--problems 50] [--seed 11] [--gpu h100]
                                             [--min-events 150000] [--max-events 400000]

The output committed in docs/sim_random_problems.txt was produced with
`--cache benchmarks/results/sim_random_problems_exact.json` (exact mode's time, DRAM bytes and
CPU seconds per problem, computed by this script with the same exact engine). Each entry
carries the fingerprint of the exact engine's sources and the GPU spec it was computed under
(exact_fingerprint.py): an entry of another fingerprint is stale and is recomputed, so a
change to the cost model, a schedule generator or the engine refreshes the cache.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import statistics
import time

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.errors import IosimError
from iosim.sim import EXACT_BELOW_EVENTS, simulate, tile_events

from exact_fingerprint import exact_fingerprint

ALGOS = ("standard", "fa1", "fa2", "fa3", "square")
HEAD_DIMS = (64, 128)
BACKWARD = ("standard", "fa1", "fa2")


def draw(rng: random.Random) -> tuple:
    """(algorithm, AttentionProblem keyword arguments) of one random problem."""
    algo = rng.choice(ALGOS)
    seq_q = int(round(2 ** rng.uniform(9, 14)))
    seq_kv = seq_q if rng.random() < 0.7 else int(round(2 ** rng.uniform(9, 14)))
    heads_kv = rng.choice((1, 2, 4, 8))
    heads_q = heads_kv * rng.choice((1, 1, 2, 4))
    direction = "fwd"
    if algo in BACKWARD and rng.random() < 0.25:
        direction = rng.choice(("bwd", "fwd+bwd"))
    return algo, dict(batch=rng.choice((1, 1, 2, 4)), heads_q=heads_q, heads_kv=heads_kv,
                      seq_q=seq_q, seq_kv=seq_kv, head_dim=rng.choice(HEAD_DIMS),
                      causal=rng.random() < 0.5, direction=direction)


def rel(a: float, b: float) -> float:
    return (a - b) / b if b else (0.0 if a == b else float("inf"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=50)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--min-events", type=int, default=EXACT_BELOW_EVENTS)
    ap.add_argument("--max-events", type=int, default=400_000)
    ap.add_argument("--cache", default="",
                    help="JSON file of exact-mode results by problem, read and extended (the "
                         "exact engine is the reference: valid while its semantics hold)")
    ap.add_argument("--only", default="",
                    help="comma-separated problem indices (0-based) to run; the others are "
                         "drawn and skipped")
    ap.add_argument("--only-exact", action="store_true", help="fill the cache only")
    ap.add_argument("--wave-queue", action="store_true",
                    help="the fast mode's L2 FIFO waits from a short exact simulation of each "
                         "kernel's waves (simulate(..., l2_queue_from_wave=True), "
                         "sim/wave_queue.py) instead of the replay's queue position")
    args = ap.parse_args(argv)
    cache = json.load(open(args.cache)) if args.cache and os.path.exists(args.cache) else {}
    only = {int(i) for i in args.only.split(",") if i}
    gpu = load_gpu(args.gpu)
    fingerprint = exact_fingerprint(gpu)
    rng = random.Random(args.seed)
    print(f"# iosim: fast (default) vs exact mode on {gpu.name}, "
          f"{args.problems} random problems, seed {args.seed}; python "
          f"{platform.python_version()}")
    print("# drawn: algorithm uniform over " + ", ".join(ALGOS) + "; seq_q = round(2^U(7, 12.5)), "
          "seq_kv = seq_q (p 0.7) else drawn alike; heads_kv in {1,2,4,8}, heads_q = heads_kv x "
          "{1,1,2,4}; batch in {1,1,2,4}; head_dim in {64,128}; causal p 0.5; bwd or fwd+bwd "
          f"p 0.25 where modelled; fp16; redrawn outside {args.min_events:,}..{args.max_events:,} "
          "tile ops")
    print(f"{'#':>3s} {'algo':8s} {'B':>2s} {'Hq':>3s} {'Hkv':>3s} {'Nq':>5s} {'Nkv':>5s} {'d':>3s} "
          f"{'causal':>6s} {'dir':>7s} {'events':>8s} {'t_exact_us':>11s} {'err_t':>8s} "
          f"{'err_dram':>8s} {'wall_exact':>10s} {'wall_fast':>9s}")
    errs_t, errs_d, drawn, index, cached, stale, exact_cpu_s = [], [], 0, -1, 0, 0, 0.0
    # entries of another fingerprint, counted as they are recomputed (the cache drops them
    # from the file at the first recomputation)
    stale_keys = {k for k, v in cache.items() if v.get("fingerprint") != fingerprint}
    while index + 1 < args.problems:
        algo, shape = draw(rng)
        drawn += 1
        try:
            schedule = build_schedule(AttentionProblem(**shape), gpu, algo)
        except IosimError:
            continue                          # a tiling that does not fit: draw again
        events = tile_events(schedule)
        if not args.min_events < events <= args.max_events:
            continue
        index += 1
        if only and index not in only:
            continue
        key = f"{args.gpu} {algo} " + json.dumps(shape, sort_keys=True)
        t0 = time.perf_counter()
        hit = cache.get(key)
        if hit is not None and hit.get("fingerprint") == fingerprint:
            # wall_exact: the CPU seconds the cached run took (nan where not recorded)
            ex_t, ex_d = hit["time_s"], hit["dram_bytes"]
            wall_ex = hit.get("cpu_s", float("nan"))
            exact_cpu_s += hit.get("cpu_s", float("nan"))
            cached += 1
        else:
            stale += key in stale_keys
            c0 = time.process_time()
            exact = simulate(schedule, gpu, "exact")
            ex_t = exact.time_s
            ex_d = exact.dram_read_bytes + exact.dram_write_bytes
            wall_ex = time.perf_counter() - t0
            cpu_s = time.process_time() - c0
            exact_cpu_s += cpu_s
            if args.cache:
                cache[key] = {"time_s": ex_t, "dram_bytes": ex_d, "cpu_s": round(cpu_s, 2),
                              "fingerprint": fingerprint}
                cache = {k: v for k, v in cache.items()           # stale entries: dropped
                         if v.get("fingerprint") == fingerprint}
                with open(args.cache, "w") as f:
                    json.dump(cache, f, indent=1, sort_keys=True)
        t1 = time.perf_counter()
        if args.only_exact:
            print(f"{index:3d} {algo:8s} exact {ex_t * 1e6:11.3f} us", flush=True)
            continue
        fast = simulate(schedule, gpu, **({"l2_queue_from_wave": True}
                                          if args.wave_queue else {}))
        t2 = time.perf_counter()
        et = rel(fast.time_s, ex_t)
        ed = rel(fast.dram_read_bytes + fast.dram_write_bytes, ex_d)
        errs_t.append(et)
        errs_d.append(ed)
        print(f"{index:3d} {algo:8s} {shape['batch']:2d} {shape['heads_q']:3d} {shape['heads_kv']:3d} "
              f"{shape['seq_q']:5d} {shape['seq_kv']:5d} {shape['head_dim']:3d} "
              f"{str(shape['causal']):>6s} {shape['direction']:>7s} {events:8d} "
              f"{ex_t * 1e6:11.3f} {et:+8.2%} {ed:+8.2%} {wall_ex:10.2f} {t2 - t1:9.2f}",
              flush=True)
    print(f"# exact engine fingerprint {fingerprint}; exact mode's CPU time over these "
          f"problems {exact_cpu_s:.0f} s"
          + (f"; {stale} stale cache entries recomputed" if stale else ""))
    if not errs_t:
        return 0
    print(f"# {len(errs_t)} problems ({drawn} drawn); |err_t| median "
          f"{statistics.median(map(abs, errs_t)):.2%}, max {max(map(abs, errs_t)):.2%}, "
          f"within 1%: {sum(abs(e) <= 0.01 for e in errs_t)}; |err_dram| median "
          f"{statistics.median(map(abs, errs_d)):.2%}, max {max(map(abs, errs_d)):.2%}, "
          f"within 2%: {sum(abs(e) <= 0.02 for e in errs_d)}")
    if cached:
        print(f"# exact mode's results of {cached} problems read from {args.cache} "
              "(wall_exact: the CPU seconds recorded with them)")
    print(f"# mean err_t {statistics.fmean(errs_t):+.2%} (rms "
          f"{math.sqrt(statistics.fmean(e * e for e in errs_t)):.2%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
