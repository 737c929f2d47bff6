"""FA-3's KV step split into its phases, per consumer warpgroup: the two-stamp builds of
measurements/h200/fa3_phases/fa3_phase_pairs_h200.json (one phase per build, clock64 cycles,
median over the steady steps) against exact mode's consumers (the same events recorded in a copy
of pipeline._Consumers.overlap; model cycles at the simulated clock). One CTA alone, N_kv 896,
d 64 with 192 and 128 Q rows and d 128 with 128. Phases (fa3_fwd.cu's PSTAMP events): turn wait
(0->1), issue of S_j and P_{j-1}V_{j-1} (1->2), S latency (2->3), softmax (3->4), the P V wait
(4->5), rescale and pack (5->6), loop (6->next 0); the model's step overhead
(Pipeline.consumer_step_overhead_cycles) is in its issue column, its rescale phase in rescale and
pack. The steps: consumer 0's S_j -> S_{j+1} with one
stamp per step (mask 0x08) and untraced (%globaltimer slots only, ns). Run from the repository
root: python scripts/fa3_phase_split.py"""
import json

import numpy as np

from iosim import AttentionProblem, load_gpu
from iosim.algorithms import build_schedule
from iosim.clock import sustained_simulation
from iosim.sim import pipeline
from iosim.sim.pipeline import _softmax_split, run_ops

PAIRS = {0x03: (0, 1), 0x06: (1, 2), 0x0c: (2, 3), 0x18: (3, 4), 0x30: (4, 5), 0x60: (5, 6), 0x41: (6, 0)}
NAMES = ("turn wait", "issue", "S latency", "softmax", "PV wait", "rescale+pack", "loop")
DATA = "measurements/h200/fa3_phases/fa3_phase_pairs_h200.json"


def measured_phase(cycles, c: int, a: int, b: int, steps) -> float:
    """Median over `steps` of consumer c's event b minus event a (b of the next step if b < a)."""
    out = []
    for j in steps:
        jb = j + 1 if b < a else j
        if jb < 8 and cycles[c][j][a] >= 0 and cycles[c][jb][b] >= 0:
            out.append(cycles[c][jb][b] - cycles[c][j][a])
    return float(np.median(out)) if out else float("nan")


FIGURE_SHAPES = ("fa3-d64-bq192-lone-nkv896-full", "fa3-d128-bq128-lone-nkv896-full")


def stamp_cost(data: dict, base: str) -> float:
    """Cycles one stamp adds to a phase: consumer 0's seven two-stamp phases summed, less its
    step with one stamp (mask 0x08, steps 1..6), over seven."""
    cyc = data[f"{base}-m08"]["cycles"][0]
    step = float(np.median([cyc[0][j + 1][3] - cyc[0][j][3] for j in range(1, 6)]))
    total = sum(measured_phase(data[f"{base}-m{m:02x}"]["cycles"][0], 0, a, b,
                               range(1, 6 if m == 0x41 else 7)) for m, (a, b) in PAIRS.items())
    return (total - step) / len(PAIRS)


def figures(data: dict = None) -> dict:
    """{(block_q, block_kv, d): (step overhead, rescale phase)} in cycles for
    fa3.CONSUMER_PHASE_CYCLES: consumer 0's turn wait (0->1; it goes first, so its waits do not
    block) and its rescale-and-pack plus loop (5->6, 6->next 0), each less the stamp cost per
    phase (stamp_cost), in the two lone shapes with every pair (d 64 with 192 rows and 3
    consumers, d 128 with 128 rows and 2)."""
    data = json.load(open(DATA)) if data is None else data
    out = {}
    for base, key in zip(FIGURE_SHAPES, ((192, 128, 64), (128, 128, 128))):
        k = stamp_cost(data, base)
        ph = {m: measured_phase(data[f"{base}-m{m:02x}"]["cycles"][0], 0, a, b,
                                range(1, 6 if m == 0x41 else 7)) for m, (a, b) in PAIRS.items()}
        out[key] = (round(ph[0x03] - k), round(ph[0x60] + ph[0x41] - 2 * k))
    return out


def model_split(d: int, nq: int, nkv: int = 896):
    """Exact mode, one CTA alone: per consumer the median over steps 2..n-2 of each phase (cycles
    at the simulated clock) and consumer 0's S_j -> S_{j+1} steps (ns)."""
    events: dict = {}
    clock = []

    def overlap(self, c, first, others):      # pipeline._Consumers.overlap with events recorded
        stall, my_vars, n, env = self._stall(c), dict(self.env_vars), self.n, self.ctx.env
        gemm0, after = self.split
        soft, post, gemm1 = _softmax_split(after)
        w0, w1 = self.gemm_work(gemm0, c), self.gemm_work(gemm1, c)
        clock.append(1.0 / self.ctx.cycle_s)

        def st(j, e):
            events.setdefault((c, j), [np.nan] * 7)[e] = env.now

        def release_v(j):
            others.release(j)
            if self.together:
                first.release(j)
        for j in range(n):
            st(j, 0)
            yield from first.wait(j, stall)
            if j:
                yield from others.wait(j - 1, stall)
            yield from self.turns.wait(c, stall)
            st(j, 1)
            done = yield from self.issue_in_turn(c, (w0, w1) if j else (w0,), stall)
            st(j, 2)
            yield from self.wait_until(done[0], stall)
            st(j, 3)
            if not self.together:
                first.release(j)
            my_vars[self.var] = self.value(j)
            yield from run_ops(self.ctx, soft, my_vars, self.share, stall, c == 0, self.streams[c])
            st(j, 4)
            if j:
                yield from self.wait_until(done[1], stall)
                release_v(j - 1)
            st(j, 5)
            yield from self.post(post, my_vars, c, stall)
            st(j, 6)
        if n:
            yield from others.wait(n - 1, stall)
            done = yield from self.issue_in_turn(c, (w1,), stall)
            yield from self.wait_until(done[0], stall)
            release_v(n - 1)

    orig = pipeline._Consumers.overlap
    pipeline._Consumers.overlap = overlap
    try:
        gpu = load_gpu("h200-calibrated")
        p = AttentionProblem(batch=1, heads_q=1, seq_q=nq, seq_kv=nkv, head_dim=d, dtype="fp16")
        s = build_schedule(p, gpu, "fa3", block_q=nq)
        events.clear()
        sustained_simulation(s, gpu, l2_protocol="ncu", time_protocol="warm", mode="exact")
    finally:
        pipeline._Consumers.overlap = orig
    hz = clock[-1]
    n = nkv // 128
    consumers = nq // 64
    split = []
    for c in range(consumers):
        row = []
        for a, b in PAIRS.values():
            v = [((events[(c, j + (b < a))][b]) - events[(c, j)][a]) * hz
                 for j in range(2, n - 1) if (c, j + (b < a)) in events]
            row.append(float(np.median(v)))
        split.append(row)
    s_done = [events[(0, j)][3] for j in range(n)]
    steps = [round((b - a) * 1e9) for a, b in zip(s_done, s_done[1:4])]
    return split, steps, hz


def main():
    data = json.load(open(DATA))
    for base in FIGURE_SHAPES:
        print(f"{base}: one stamp adds {stamp_cost(data, base):.0f} cycles to a phase")
    for key, (over, post) in figures(data).items():
        print(f"tiling {key}: consumer 0's step overhead {over} cycles, rescale phase {post} "
              "cycles (fa3.CONSUMER_PHASE_CYCLES)")
    for d, nq in ((64, 192), (64, 128), (128, 128)):
        base = f"fa3-d{d}-bq{nq}-lone-nkv896-full"
        consumers = nq // 64
        print(f"== d {d}, {nq} Q rows ({consumers} consumers), one CTA, N_kv 896: cycles per phase, "
              "median of steps 1..6 (softmax of consumer 0: steps 4..6, its steps 1..3 carry a "
              "%globaltimer stamp inside)")
        split, steps, hz = model_split(d, nq)
        print(f"{'':14s}" + "".join(f"{n:>13s}" for n in NAMES))
        for c in range(consumers):
            meas = []
            for m, (a, b) in PAIRS.items():
                key = f"{base}-m{m:02x}"
                if key not in data:
                    meas.append(float("nan"))
                    continue
                cyc = data[key]["cycles"][0]
                steps_used = range(4, 7) if (m == 0x18 and c == 0) else range(1, 6 if m == 0x41 else 7)
                meas.append(measured_phase(cyc, c, a, b, steps_used))
            print(f"c{c} measured   " + "".join(f"{x:13.0f}" for x in meas))
            print(f"c{c} model      " + "".join(f"{x:13.0f}" for x in split[c]))
        for tag in ("gt", "m08"):
            key = f"{base}-{tag}"
            if key in data:
                print(f"  consumer 0's steps, ns, {'untraced' if tag == 'gt' else 'one stamp per step'}: "
                      f"{[round(x) for x in data[key]['steps_ns']]}"
                      + (f" (SM clock {data[key]['clock_ghz']:.3f} GHz)" if "clock_ghz" in data[key] else ""))
        print(f"  model: {steps} (clock {hz / 1e9:.3f} GHz)")


if __name__ == "__main__":
    main()
