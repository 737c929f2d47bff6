"""Where a CTA's time goes when every SM runs one, against a CTA (nearly) alone: the project's
FA-3 and FA-2 forward kernels built with -DIOSIM_STAMPS (iosim_common.cuh: %globaltimer into 8
slots per CTA with plain stores, no atomics). FA-3 slots: 0 entry, 1 the producer before its
first copy, 2 consumer 0 has Q, 3 its first S is done, 4 its loop is done, 5 its O/LSE stores
are issued, 6 the last consumer's end, 8 the last consumer's loop is done, 9 consumer 0 is past
the ping-pong barrier after its loop, 10 the last consumer's first S is done; FA-2: 0 entry, 2 the first K/V (and Q) landed, 4 loop
done, 5 / 6 thread 0 / the last thread after the stores. N_q 512, H 16, fp16, validation
tilings; full grid B 32 and a lone head (B 1, H 1: 3-4 CTAs on different SMs). Per shape the
median over CTAs of each phase (ns) and, per SM, the gap from a CTA's slot 5/6 to the next CTA's
entry. Ten launches after two warm-ups; the stamps of the last launch.

    python3 scripts/experiments/cta_phases_h200.py OUT.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from iosim import AttentionProblem  # noqa: E402

SHAPES = [("fa3", 64, 32, 16, 512), ("fa3", 64, 1, 1, 512), ("fa3", 128, 32, 16, 512), ("fa3", 128, 1, 1, 512),
          ("fa3", 128, 32, 16, 128), ("fa3", 128, 1, 1, 128),
          ("fa2", 128, 32, 16, 512), ("fa2", 128, 1, 1, 512), ("fa2", 64, 32, 16, 512), ("fa2", 64, 1, 1, 512)]


def main(out: Path) -> None:
    import numpy as np
    from kernel_defines import relative_rows, stamped_run

    res = {}
    for algo, d, batch, heads, nkv in SHAPES:
        p = AttentionProblem(batch=batch, heads_q=heads, seq_q=512, seq_kv=nkv, head_dim=d, dtype="fp16")
        rows = relative_rows(stamped_run(p, algo))
        phases = {}
        names = {"fa3": [(0, 1, "entry_to_producer"), (1, 2, "producer_to_q"), (2, 3, "q_to_first_s"),
                         (3, 4, "first_s_to_loop_end"), (4, 5, "epilogue"), (0, 5, "lifetime_c0"),
                         (0, 6, "lifetime_last"), (3, 10, "last_consumer_first_s_after_c0"),
                         (4, 8, "last_consumer_loop_end_after_c0"), (4, 9, "c0_pingpong_wait"),
                         (9, 5, "c0_epilogue_after_wait"), (8, 6, "last_consumer_epilogue")],
                 "fa2": [(0, 2, "entry_to_first_tiles"), (2, 4, "loop_after_first"), (4, 5, "epilogue"),
                         (0, 5, "lifetime_t0"), (0, 6, "lifetime_last")]}[algo]
        for a, b, name in names:
            v = rows[:, b] - rows[:, a]
            phases[name] = {"median_ns": float(np.median(v)), "p10_ns": float(np.percentile(v, 10)),
                            "p90_ns": float(np.percentile(v, 90))}
        gaps = []
        for sm in np.unique(rows[:, 7]):
            r = rows[rows[:, 7] == sm]
            r = r[np.argsort(r[:, 0])]
            gaps.extend((r[1:, 0] - np.maximum(r[:-1, 5], r[:-1, 6])).tolist())
        k = f"{algo}-d{d}-B{batch}-H{heads}-Nkv{nkv}"
        res[k] = {"ctas": int(len(rows)), "phases": phases,
                  "next_cta_gap_ns": ({"median": float(np.median(gaps)), "p10": float(np.percentile(gaps, 10)),
                                       "p90": float(np.percentile(gaps, 90))} if gaps else None),
                  "span_ns": float(rows[:, :7].max())}
        print(k, json.dumps({n: round(v["median_ns"]) for n, v in phases.items()}),
              "gap", None if not gaps else round(float(np.median(gaps))), "span", res[k]["span_ns"], flush=True)
    out.write_text(json.dumps(res, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
