"""Why a CTA's first copies land later when every SM runs one: the project's FA-3 / FA-2
forward kernels built with -DIOSIM_STAMPS (see cta_phases_h200.py for the slots), over shapes
that separate the Q tile's row layout from the load on the chip, and with the O store on and
off (IOSIM_O_STORE 1 / 0) to see whether the previous CTA's O stores on the same SM delay the
next CTA's Q. Shapes (N_q = N_kv 512, fp16): B 32 × H 16 (rows 4 KB apart, full grid), B 512 ×
H 1 (rows contiguous, full grid), B 1 × H 16 (strided, one CTA per SM, one wave), B 16 × H 1
(contiguous, one wave), B 1 × H 1. Per shape the median of each phase over the first CTA of
each SM and over the later ones, and the raw stamps (npz).

    python3 scripts/experiments/q_latency_h200.py OUT.json OUT.npz
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from iosim import AttentionProblem  # noqa: E402

FA3_SHAPES = [(32, 16), (512, 1), (1, 16), (16, 1), (1, 1)]
RUNS = ([("fa3", 128, b, h, o) for b, h in FA3_SHAPES for o in (1, 0)]
        + [("fa3", 64, b, h, o) for b, h in ((32, 16), (512, 1), (1, 16)) for o in (1, 0)]
        + [("fa2", 128, b, h, o) for b, h in ((32, 16), (512, 1), (1, 16)) for o in (1, 0)])
PHASES = {"fa3": [(0, 1, "entry_to_producer"), (1, 2, "producer_to_q"), (2, 3, "q_to_first_s"),
                  (3, 4, "first_s_to_loop_end"), (4, 5, "epilogue"), (0, 6, "lifetime_last")],
          "fa2": [(0, 2, "entry_to_first_tiles"), (2, 4, "loop_after_first"), (4, 5, "epilogue"),
                  (0, 6, "lifetime_last")]}


def summary(algo, rows):
    import numpy as np
    first = np.zeros(len(rows), dtype=bool)
    gap = np.full(len(rows), np.nan)
    for sm in np.unique(rows[:, 7]):
        idx = np.where(rows[:, 7] == sm)[0]
        idx = idx[np.argsort(rows[idx, 0])]
        first[idx[0]] = True
        gap[idx[1:]] = rows[idx[1:], 0] - np.maximum(rows[idx[:-1], 5], rows[idx[:-1], 6])
    out = {}
    for a, b, name in PHASES[algo]:
        v = rows[:, b] - rows[:, a]
        out[name] = {"first_on_sm_ns": float(np.median(v[first])),
                     "later_ns": float(np.median(v[~first])) if (~first).any() else None}
    out["gap_to_previous_ns"] = float(np.nanmedian(gap)) if (~first).any() else None
    out["ctas"] = int(len(rows))
    out["first_on_sm"] = int(first.sum())
    out["span_ns"] = float(rows[:, :7].max())
    return out


def main(out_json: Path, out_npz: Path) -> None:
    import numpy as np
    from kernel_defines import relative_rows, stamped_run

    res, raw = {}, {}
    for algo, d, batch, heads, o_store in RUNS:
        p = AttentionProblem(batch=batch, heads_q=heads, seq_q=512, seq_kv=512, head_dim=d, dtype="fp16")
        rows = relative_rows(stamped_run(p, algo, IOSIM_O_STORE=o_store))
        k = f"{algo}-d{d}-B{batch}-H{heads}-ostore{o_store}"
        res[k] = summary(algo, rows)
        raw[k] = rows
        print(k, json.dumps({n: (v["first_on_sm_ns"], v["later_ns"]) if isinstance(v, dict) else v
                             for n, v in res[k].items()}), flush=True)
    out_json.write_text(json.dumps(res, indent=1, sort_keys=True))
    np.savez_compressed(out_npz, **{k.replace("-", "_"): v for k, v in raw.items()})


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
