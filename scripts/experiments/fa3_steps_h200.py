"""FA-3's KV step, stamped: the project's FA-3 forward kernel built with -DIOSIM_STAMPS
(cta_phases_h200.py's slots, and 11-13 consumer 0's S_j done for j = 1..3, 14 the last
consumer's S_3 done), N_kv 512 (4 steps), fp16, d 64 (192-row tile, 3 consumers) and 128
(128 rows, 2), as built (full) and with the intra-warpgroup overlap or the ping-pong barriers
compiled out (FA3_INTRA_OVERLAP=0, FA3_PINGPONG=0); one CTA alone (B 1, H 1, N_q one tile) and
a full grid (B 32, H 16, N_q 512). Per shape the medians over CTAs of consumer 0's S_j -> S_j+1
steps, its first S, its loop end, the last consumer's lag. Twelve launches, the last one's stamps.

    python3 scripts/experiments/fa3_steps_h200.py OUT.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from iosim import AttentionProblem  # noqa: E402

VARIANTS = {"full": {}, "no_intra": {"FA3_INTRA_OVERLAP": 0}, "no_pingpong": {"FA3_PINGPONG": 0}}
SHAPES = [(d, b, h, nq) for d, bq in ((64, 192), (128, 128)) for b, h, nq in ((1, 1, bq), (32, 16, 512))]


def main(out: Path) -> None:
    import numpy as np
    from kernel_defines import stamped_run

    res = {}
    for d, batch, heads, nq in SHAPES:
        for vname, extra in VARIANTS.items():
            p = AttentionProblem(batch=batch, heads_q=heads, seq_q=nq, seq_kv=512, head_dim=d, dtype="fp16")
            st = stamped_run(p, "fa3", **extra)
            s = lambda a, b: float(np.median(st[:, b] - st[:, a]))
            row = {"steps_ns": [s(3, 11), s(11, 12), s(12, 13)], "entry_to_first_s": s(0, 3),
                   "first_s_to_loop_end": s(3, 4), "last_s3_after_c0": s(13, 14),
                   "last_loop_end_after_c0": s(4, 8), "lifetime_last": s(0, 6), "ctas": int(len(st))}
            k = f"fa3-d{d}-B{batch}-H{heads}-Nq{nq}-{vname}"
            res[k] = row
            print(k, json.dumps(row), flush=True)
    out.write_text(json.dumps(res, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
