"""Where the fast mode's aggregated model and exact mode part ways, CTA by CTA.

The figures docs/simulator.md quotes about the aggregated model's mechanisms come from here
(batch 1, 32 heads, d 128, fp16, forward, h100):

    python benchmarks/sim_diagnostics.py waves square 4096          # per wave, tail wave
    python benchmarks/sim_diagnostics.py waves fa2 4096 --causal    # CTA 0, first divergence
    python benchmarks/sim_diagnostics.py waves standard 512 --kernel 1   # the softmax kernel
    python benchmarks/sim_diagnostics.py l2-queue square 4096       # exact mode's L2 FIFO waits
    python benchmarks/sim_diagnostics.py budget                     # headline vs replay budget

`--row N` takes problem N of the random benchmark instead (sim_random_problems.py, `--seed`,
default 11: its own draw), e.g. the figures docs/simulator.md quotes about its misses:

    python benchmarks/sim_diagnostics.py band --row 34              # fast vs exact, perturbed GPUs
    python benchmarks/sim_diagnostics.py waves --row 19 --kernel 0  # per wave (232 waves)
    python benchmarks/sim_diagnostics.py dram-queue --row 19        # K misses behind write-backs
    python benchmarks/sim_diagnostics.py dram-backlog --row 11      # DRAM work carried across kernels
    python benchmarks/sim_diagnostics.py slot-phases --row 32       # co-resident CTAs' phases
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict

import random

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.errors import IosimError
from iosim.sim import EXACT_BELOW_EVENTS, memory, simulate, tile_events


ROW = None        # (seed, index): main() sets it from --row / --seed


def _schedule(algo: str, n: int, causal: bool):
    gpu = load_gpu("h100")
    if ROW is not None:
        return random_problem(*ROW, gpu)[1], gpu
    return build_schedule(AttentionProblem(seq_q=n, heads_q=32, causal=causal), gpu, algo), gpu


def random_problem(seed: int, index: int, gpu, min_events: int = EXACT_BELOW_EVENTS,
                   max_events: int = 400_000) -> tuple:
    """((algorithm, shape), schedule) of problem `index` of sim_random_problems.py's draw with
    that seed and its default event bounds (the same loop: redrawn outside the bounds)."""
    from sim_random_problems import draw
    rng, k = random.Random(seed), -1
    while True:
        algo, shape = draw(rng)
        try:
            schedule = build_schedule(AttentionProblem(**shape), gpu, algo)
        except IosimError:
            continue
        if min_events < tile_events(schedule) <= max_events:
            k += 1
            if k == index:
                return (algo, shape), schedule


def waves(algo: str, n: int, causal: bool, kernel: int = 0) -> None:
    """Per wave of `slots` CTAs in launch order (of one kernel): mean CTA duration in both
    modes; CTA 0; the first CTA the two modes put on different SMs, and how far apart the
    ends of the two CTAs whose order decided it were in exact mode. First, every kernel's
    time in both modes."""
    schedule, gpu = _schedule(algo, n, causal)
    exact, agg = simulate(schedule, gpu, "exact"), simulate(schedule, gpu, exact_below_events=0)
    for ke, ka in zip(exact.kernels, agg.kernels):
        print(f"kernel {ke.name}: exact {ke.time_s * 1e6:.2f} us, aggregated "
              f"{ka.time_s * 1e6:.2f} us ({ka.time_s / ke.time_s - 1:+.1%})")
    ex, ag = exact.timeline_df(), agg.timeline_df()
    ex, ag = (ex[ex.kernel == kernel].set_index("cta"), ag[ag.kernel == kernel].set_index("cta"))
    for df in (ex, ag):                     # times from the kernel's start
        t0 = df.start_s.min()
        df["start_s"], df["end_s"] = df.start_s - t0, df.end_s - t0
    dur_e, dur_a = ex.end_s - ex.start_s, ag.end_s - ag.start_s
    slots = int((ex.start_s == 0).sum())
    print(f"{'random problem' if ROW else f'{algo} N={n}'}{' causal' if causal else ''}: {len(ex)} CTAs, "
          f"{slots} in the first wave")
    for a in range(0, len(ex), slots):
        e, g = dur_e.iloc[a:a + slots].mean(), dur_a.iloc[a:a + slots].mean()
        print(f"  CTAs {a:5d}-{min(a + slots, len(ex)) - 1:5d}: exact {e * 1e6:8.2f} us, "
              f"aggregated {g * 1e6:8.2f} us ({g / e - 1:+.2%})")
    print(f"  CTA 0: aggregated {dur_a.iloc[0] / dur_e.iloc[0] - 1:+.1%} against exact")
    differ = ex.index[ex.sm != ag.sm]
    if len(differ):
        c = int(differ[0])
        # in exact mode CTA c took the slot its SM freed first; the SM the aggregated model
        # chose freed one in exact mode too, at about the same time
        start = ex.start_s[c]
        freed_e = ex[(ex.sm == ex.sm[c]) & (ex.end_s <= start)].end_s.max()
        ends = ex[ex.sm == ag.sm[c]].end_s
        freed_a = ends.iloc[(ends - start).abs().argmin()]
        gap = abs(freed_a - freed_e)
        print(f"  first CTA on a different SM: {c} (exact SM {ex.sm[c]}, aggregated SM "
              f"{ag.sm[c]})" + (f"; in exact mode the slots it could take freed "
                                f"{gap * 1e9:.1f} ns apart" if gap == gap else ""))
    print(f"  schedule: exact {exact.time_s * 1e6:.2f} us, aggregated {agg.time_s * 1e6:.2f} us")


def l2_queue(algo: str, n: int, causal: bool) -> None:
    """Exact mode: per tensor, the mean time a load waits on the L2↔SM FIFO before its own
    transfer starts, and the mean time from issue until the tile is in shared memory."""
    schedule, gpu = _schedule(algo, n, causal)
    queued, total, count = defaultdict(float), defaultdict(float), defaultdict(int)
    original = memory.ExactMemory.load

    def load(self, key, tensor, nbytes, now_s, *rest, **kw):
        queued[tensor] += max(0.0, self.l2_server.free_s - now_s)
        ready = original(self, key, tensor, nbytes, now_s, *rest, **kw)
        total[tensor] += ready - now_s
        count[tensor] += 1
        return ready

    memory.ExactMemory.load = load
    try:
        simulate(schedule, gpu, "exact")
    finally:
        memory.ExactMemory.load = original
    for t in sorted(count):
        print(f"  {t}: {count[t]} loads, L2 FIFO wait {queued[t] / count[t] * 1e9:6.1f} ns, "
              f"issue to data {total[t] / count[t] * 1e9:6.1f} ns")


# GPUs a little off the config: the SM clock (what a compute-bound kernel's CTA ends follow)
# and the L2 and DRAM latencies (sim_speed_accuracy.py's band perturbs only those)
BAND = [("clock_hz", f) for f in (0.99, 0.995, 1.005, 1.01)] + [
    (name, f) for f in (0.995, 1.005) for name in ("l2_latency_s", "dram_latency_s")]


def band(algo: str, n: int, causal: bool) -> None:
    """Both modes on slightly perturbed GPUs: exact mode's time against the unperturbed
    exact time, and the fast mode's error against exact mode on the same GPU. A schedule
    whose end is decided by a few near-simultaneous CTA ends (a causal grid's tail packing)
    jumps between branches in exact mode, and the fast mode's error with it."""
    schedule, gpu = _schedule(algo, n, causal)
    base = simulate(schedule, gpu, "exact").time_s
    print(f"  unperturbed: exact {base * 1e6:.3f} us, fast "
          f"{simulate(schedule, gpu).time_s / base - 1:+.2%}")
    for name, f in BAND:
        g = gpu.with_(**{name: getattr(gpu, name) * f})
        ex, fa = simulate(schedule, g, "exact").time_s, simulate(schedule, g).time_s
        print(f"  {name} x {f}: exact {ex * 1e6:10.3f} us ({ex / base - 1:+.2%}), "
              f"fast {fa / ex - 1:+.2%} against it")


def dram_queue(algo: str, n: int, causal: bool, kernel: int = 0) -> None:
    """Exact mode, one kernel: per load tensor and head (the key's second coordinate), the
    loads that miss, and for them the mean DRAM FIFO backlog at issue (write-backs are fire
    and forget but hold the FIFO: a miss queues behind them) and the mean time from issue to
    data; the hits' mean time from issue to data (a hit on a line still in flight waits for
    it) and L2 FIFO wait; per stored tensor and head the L2 FIFO wait."""
    schedule, gpu = _schedule(algo, n, causal)
    k = schedule.kernels[kernel]
    start = [0.0, float("inf")]
    stats = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    load0, store0 = memory.ExactMemory.load, memory.ExactMemory.store

    def load(self, key, tensor, nbytes, now_s, *rest, **kw):
        hit = key in self.l2.lines
        dram_q = max(0.0, self.dram_server.free_s - now_s)
        l2_q = max(0.0, self.l2_server.free_s - now_s)
        ready = load0(self, key, tensor, nbytes, now_s, *rest, **kw)
        s = stats["hit" if hit else "miss", tensor, key[2] if len(key) > 2 else 0]
        s[0] += 1
        s[1] += dram_q
        s[2] += ready - now_s
        s[3] += l2_q
        return ready

    def store(self, key, tensor, nbytes, reduce, now_s, *rest, **kw):
        l2_q = max(0.0, self.l2_server.free_s - now_s)
        s = stats["store", tensor, key[2] if len(key) > 2 else 0]
        s[0] += 1
        s[3] += l2_q
        return store0(self, key, tensor, nbytes, reduce, now_s, *rest, **kw)

    import dataclasses
    memory.ExactMemory.load, memory.ExactMemory.store = load, store
    try:
        r = simulate(dataclasses.replace(schedule, kernels=schedule.kernels[:kernel + 1]),
                     gpu, "exact")
    finally:
        memory.ExactMemory.load, memory.ExactMemory.store = load0, store0
    print(f"  kernel {k.name} (kernels before it included in the counts): "
          f"{r.kernels[-1].time_s * 1e6:.2f} us")
    for (what, tensor, head), (c, dq, lat, l2q) in sorted(stats.items()):
        if what == "miss":
            print(f"  {tensor} head {head}: {c} misses, DRAM backlog at issue {dq / c * 1e9:7.1f} ns, "
                  f"issue to data {lat / c * 1e9:7.1f} ns")
        elif what == "hit":
            print(f"  {tensor} head {head}: {c} hits, issue to data {lat / c * 1e9:7.1f} ns, "
                  f"L2 FIFO wait {l2q / c * 1e9:6.1f} ns")
        else:
            print(f"  store {tensor} head {head}: {c}, L2 FIFO wait {l2q / c * 1e9:6.1f} ns")


def _logged_dram_server(log: list):
    """memory.dram_server, its reservations logged as (issue time, FIFO free time after)."""
    make0 = memory.dram_server

    def make(gpu):
        server = make0(gpu)
        base = type(server)

        class Logged(base):
            __slots__ = ()

            def reserve(self, now_s, amount):
                out = base.reserve(self, now_s, amount)
                log.append((now_s, self.free_s))
                return out

            if hasattr(base, "reserve_write"):
                def reserve_write(self, now_s, nbytes):
                    out = base.reserve_write(self, now_s, nbytes)
                    log.append((now_s, self.free_s))
                    return out

        logged = object.__new__(Logged)
        for cls in base.__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if hasattr(server, slot):
                    setattr(logged, slot, getattr(server, slot))
        return logged
    return make0, make


def dram_backlog(algo: str, n: int, causal: bool) -> None:
    """Per kernel: time and DRAM utilization (busy time over the kernel's time) in exact and
    fast mode, and exact mode's DRAM FIFO backlog (work accepted, not yet served) when the
    kernel starts (before its own first loads) and when its last CTA ends. Exact mode's write-backs are fire and forget,
    so a DRAM-bound kernel can end with work still queued, which the next kernel's loads wait
    behind (utilization above 1); the fast mode charges a kernel all of its DRAM work."""
    import bisect
    schedule, gpu = _schedule(algo, n, causal)
    log: list = []
    make0, make = _logged_dram_server(log)
    memory.dram_server = make
    try:
        ex = simulate(schedule, gpu, "exact")
    finally:
        memory.dram_server = make0
    fa = simulate(schedule, gpu)
    times = [t for t, _ in log]

    def backlog(t: float) -> float:       # what was accepted before t and is not served at t
        i = bisect.bisect_left(times, t) - 1
        return max(0.0, log[i][1] - t) if i >= 0 else 0.0

    for ke, kf in zip(ex.kernels, fa.kernels):
        print(f"  {ke.name:18s} exact {ke.time_s * 1e6:9.2f} us (DRAM util {ke.utilization['dram']:.3f}), "
              f"fast {kf.time_s * 1e6:9.2f} us ({kf.time_s / ke.time_s - 1:+.2%}, util "
              f"{kf.utilization['dram']:.3f}); exact backlog at start {backlog(ke.start_s) * 1e6:6.2f} us, "
              f"at end {backlog(ke.end_s) * 1e6:6.2f} us")
    print(f"  schedule: exact {ex.time_s * 1e6:.2f} us, fast {fa.time_s * 1e6:.2f} us "
          f"({fa.time_s / ex.time_s - 1:+.2%})")


def slot_phases(algo: str, n: int, causal: bool, kernel: int = 0) -> None:
    """Exact mode: on each SM, the time between consecutive CTA starts over the later CTA's
    duration (its slot's phase against the slot that started before it; the first two CTAs
    of an SM, the first wave's, left out): quantiles 5/25/50/75/95%. Evenly spaced slots of
    k per SM give 1/k; slots in lockstep, 0 and 1 alternately."""
    schedule, gpu = _schedule(algo, n, causal)
    df = simulate(schedule, gpu, "exact").timeline_df()
    df = df[df.kernel == kernel].sort_values(["sm", "start_s"])
    offs = []
    for _, g in df.groupby("sm"):
        st, en = g.start_s.to_numpy(), g.end_s.to_numpy()
        offs += [(st[i] - st[i - 1]) / (en[i] - st[i]) for i in range(2, len(st))]
    offs.sort()
    q = [offs[min(len(offs) - 1, int(f * len(offs)))] for f in (0.05, 0.25, 0.5, 0.75, 0.95)]
    print(f"  {len(offs)} starts; offset in CTA durations at 5/25/50/75/95%: "
          + " ".join(f"{x:.3f}" for x in q))


def budget() -> None:
    """The headline problem at three L2 replay budgets: DRAM reads, in-process time (second
    run of each)."""
    schedule, gpu = _schedule("fa2", 32768, False)
    for b in (20_000, 50_000, 100_000):
        simulate(schedule, gpu, l2_sample_budget=b)
        t0 = time.perf_counter()
        r = simulate(schedule, gpu, l2_sample_budget=b)
        print(f"  budget {b:7,d}: DRAM read {r.dram_read_bytes / 1e6:6.0f} MB, replayed CTAs "
              f"{r.model['l2_simulated_ctas']}, simulate {time.perf_counter() - t0:.2f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["waves", "l2-queue", "budget", "band", "dram-queue",
                                         "dram-backlog", "slot-phases"])
    ap.add_argument("algo", nargs="?", default="fa2")
    ap.add_argument("seq", nargs="?", type=int, default=4096)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--kernel", type=int, default=0,
                    help="kernel index for waves and dram-queue [0]")
    ap.add_argument("--row", type=int, default=None,
                    help="problem ROW of sim_random_problems.py's draw instead of algo/seq")
    ap.add_argument("--seed", type=int, default=11, help="the draw's seed for --row [11]")
    args = ap.parse_args(argv)
    global ROW
    if args.row is not None:
        ROW = (args.seed, args.row)
        gpu = load_gpu("h100")
        (algo, shape), _ = random_problem(args.seed, args.row, gpu)
        print(f"random problem {args.row} (seed {args.seed}): {algo} {shape}")
    if args.what == "waves":
        waves(args.algo, args.seq, args.causal, args.kernel)
    elif args.what == "l2-queue":
        l2_queue(args.algo, args.seq, args.causal)
    elif args.what == "band":
        band(args.algo, args.seq, args.causal)
    elif args.what == "dram-queue":
        dram_queue(args.algo, args.seq, args.causal, args.kernel)
    elif args.what == "dram-backlog":
        dram_backlog(args.algo, args.seq, args.causal)
    elif args.what == "slot-phases":
        slot_phases(args.algo, args.seq, args.causal, args.kernel)
    else:
        budget()
    return 0


if __name__ == "__main__":
    sys.exit(main())
