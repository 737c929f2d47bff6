"""FA-3's KV step phase by phase, per consumer warpgroup: the project's FA-3 forward kernel built
with -DIOSIM_STAMPS -DIOSIM_PHASE_STAMPS=n (fa3_fwd.cu's PSTAMP: thread 0 of each consumer
writes clock64 at eight points of each KV step j < 8, for the first n CTAs). Events (slot e):

  intra overlap (as built):  0 step top, 1 turn acquired (after the ping-pong named barrier
      and the K/V full waits), 2 S_j (and P_{j-1} V_{j-1}) issued, 3 S_j done, 4 softmax_j
      done, 5 P_{j-1} V_{j-1} done, 6 O rescaled and P_j packed; the last P V after the loop
      is step n_kv (events 0, 1, 2, 5)
  no intra overlap:  0 step top, 1 turn for S_j, 2 S_j issued, 3 S_j done, 4 softmax_j done,
      5 rescale + pack done, 6 turn for P_j V_j (after the V wait), 7 P_j V_j done

Shapes: fp16, one CTA alone (B 1, H 1, N_q one tile, N_kv 896: seven steps) at d 64 with its
192-row tile (3 consumers) and with a 128-row tile (2 consumers), and d 128 (128 rows, 2
consumers); as built and without the intra-warpgroup overlap; and the full grid of the
validation's N 512 rows (B 32, H 16) as built, its first 264 CTAs stamped. Twelve launches of
one input set, the last one's stamps. Output: per shape the raw cycles [cta][consumer][step]
[event] relative to the CTA's first stamp (-1 where not written).

    python3 scripts/experiments/fa3_phase_stamps_h200.py OUT.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from iosim import AttentionProblem  # noqa: E402

STAMP_SLOTS = 16
PHASE_SLOTS = 3 * 8 * 8          # consumers (at most 3) x steps x events per CTA
VARIANTS = {"full": {}, "no_intra": {"FA3_INTRA_OVERLAP": 0}}
# (name, d, block_q, batch, heads, n_q, n_kv, variants, CTAs stamped)
SHAPES = [("d64-bq192-lone", 64, 192, 1, 1, 192, 896, ("full", "no_intra"), 1),
          ("d64-bq128-lone", 64, 128, 1, 1, 128, 896, ("full", "no_intra"), 1),
          ("d128-bq128-lone", 128, 128, 1, 1, 128, 896, ("full", "no_intra"), 1),
          ("d64-bq192-grid", 64, 192, 32, 16, 512, 512, ("full",), 264),
          ("d128-bq128-grid", 128, 128, 32, 16, 512, 512, ("full",), 264)]


def run(problem, block_q: int, n_stamped: int, launches: int = 12, **defines):
    import cupy as cp
    import numpy as np
    from iosim.algorithms import build_schedule
    from iosim.kernels.reference import random_inputs
    from iosim.kernels.run import device_inputs
    from kernel_defines import launcher
    sched = build_schedule(problem, "h200", "fa3", block_q=block_q)
    n_ctas = sched.kernels[0].num_ctas

    def buffer(k):
        return cp.full(k.num_ctas * STAMP_SLOTS + n_stamped * PHASE_SLOTS, -1, dtype=np.int64).view(np.uint64)
    ln = launcher(sched, stamps=buffer, IOSIM_STAMPS=1, IOSIM_PHASE_STAMPS=n_stamped, **defines)
    tensors = device_inputs(random_inputs(problem, np.random.default_rng(1)), problem.dtype)
    for _ in range(launches):
        ln.run(tensors)
    cp.cuda.runtime.deviceSynchronize()
    raw = cp.asnumpy(ln.stamps).view(np.int64)
    ph = raw[n_ctas * STAMP_SLOTS:].reshape(n_stamped, 3, 8, 8)
    rel = np.where(ph >= 0, ph - np.where(ph >= 0, ph, np.iinfo(np.int64).max).min(axis=(1, 2, 3),
                                                                                   keepdims=True), -1)
    return rel, raw[:n_ctas * STAMP_SLOTS].reshape(n_ctas, STAMP_SLOTS)


def main(out: Path) -> None:
    import numpy as np
    res = {}
    for name, d, bq, b, h, nq, nkv, variants, n_st in SHAPES:
        for v in variants:
            p = AttentionProblem(batch=b, heads_q=h, seq_q=nq, seq_kv=nkv, head_dim=d, dtype="fp16")
            rel, st = run(p, bq, n_st, **VARIANTS[v])
            key = f"fa3-{name}-nkv{nkv}-{v}"
            res[key] = {"consumers": bq // 64, "steps": nkv // 128, "cycles": rel.tolist(),
                        "sm": st[:n_st, 7].tolist()}
            c0 = rel[0, 0]
            if v == "full":
                s_done = c0[:, 3]
            else:
                s_done = c0[:, 3]
            steps = [int(b_ - a_) for a_, b_ in zip(s_done[1:], s_done[2:]) if a_ >= 0 and b_ >= 0]
            print(key, "c0 S-done steps (clk):", steps, flush=True)
            for c in range(bq // 64):
                print("  c%d" % c, " | ".join(" ".join("%5d" % x for x in rel[0, c, j]) for j in (2, 3)), flush=True)
    out.write_text(json.dumps(res))
    print("wrote", out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
