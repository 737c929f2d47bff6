"""Where the fast mode's aggregated model and exact mode part ways, CTA by CTA.

The figures docs/simulator.md quotes about the aggregated model's mechanisms come from here
(batch 1, 32 heads, d 128, fp16, forward, h100):

    python benchmarks/sim_diagnostics.py waves square 4096          # per wave, tail wave
    python benchmarks/sim_diagnostics.py waves fa2 4096 --causal    # CTA 0, first divergence
    python benchmarks/sim_diagnostics.py waves standard 512 --kernel 1   # the softmax kernel
    python benchmarks/sim_diagnostics.py l2-queue square 4096       # exact mode's L2 FIFO waits
    python benchmarks/sim_diagnostics.py budget                     # headline vs replay budget
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.sim import memory, simulate


def _schedule(algo: str, n: int, causal: bool):
    gpu = load_gpu("h100")
    return build_schedule(AttentionProblem(seq_q=n, heads_q=32, causal=causal), gpu, algo), gpu


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
    print(f"{algo} N={n}{' causal' if causal else ''}: {len(ex)} CTAs, {slots} in the first wave")
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

    def load(self, key, tensor, nbytes, now_s):
        queued[tensor] += max(0.0, self.l2_server.free_s - now_s)
        ready = original(self, key, tensor, nbytes, now_s)
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
    ap.add_argument("what", choices=["waves", "l2-queue", "budget"])
    ap.add_argument("algo", nargs="?", default="fa2")
    ap.add_argument("seq", nargs="?", type=int, default=4096)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--kernel", type=int, default=0, help="kernel index for waves [0]")
    args = ap.parse_args(argv)
    if args.what == "waves":
        waves(args.algo, args.seq, args.causal, args.kernel)
    elif args.what == "l2-queue":
        l2_queue(args.algo, args.seq, args.causal)
    else:
        budget()
    return 0


if __name__ == "__main__":
    sys.exit(main())
