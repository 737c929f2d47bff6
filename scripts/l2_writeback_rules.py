"""DRAM write-backs of validation rows under two sharp L2 write-back rules, against ncu's
(evidence for issue 12's DRAM budget; not part of the model).

The rows' DRAM reads agree with the model's within a few percent where their DRAM errors are
largest below N = 65,536; their write-backs do not (docs/validation.md, "DRAM bytes"). Each row's
schedule is replayed in exact mode under the ncu protocol, every L2 access logged
(l2_reuse_distances.logged_replay); per kernel the log is then replayed offline through an LRU
of 0.70 × 60 MiB (the model's) under two rules for when a dirty line is written back:
  LRU.70     when the LRU evicts it (the model's rule until the dirty limit was added,
             memory.L2_DIRTY_FRACTION; it reproduced exact mode's write-backs then)
  stack 29.7 once its LRU stack distance exceeds 29.7 MB: the bytes the H200 keeps dirty at a
             kernel's end after writing a buffer once (l2_probe.csv write_once: F − writes
             = 29.6–29.8 MB for F = 40..60 MiB)
Dirty lines within the rule's reach at a kernel's end are counted by no kernel (ncu).

    python scripts/l2_writeback_rules.py [ROW_ID ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import l2_reuse_distances as reuse                                 # noqa: E402

from iosim.algorithms import build_schedule                      # noqa: E402
from iosim.problem import PROBLEM_KEYS, AttentionProblem         # noqa: E402

L2_BYTES = 60 * 2**20
LRU_BYTES = 0.70 * L2_BYTES
DIRTY_STACK_BYTES = 29.7e6
ROWS = ["iosim-fa1-fwd-N512-d64-full", "iosim-fa1-fwd-N1024-d64-full",
        "iosim-fa2-fwd-N2048-d128-full", "iosim-fa2-fwd-N4096-d128-H8-B4-fp16-full",
        "iosim-fa2-bwd-N1024-d128-full", "iosim-fa2-bwd-N4096-d128-full",
        "iosim-fa2-bwd-N2048-d64-H16-B8-fp16-causal", "iosim-fa2-bwd-N4096-d64-H32-KV8-B1-fp16-full"]


def writebacks(accesses, dirty_reach: float, lru_bytes: float = LRU_BYTES) -> float:
    """Write-back bytes of one kernel's accesses (time, key, bytes, is_store) when a dirty line
    is written back once its stack distance exceeds dirty_reach (≤ lru_bytes: eviction)."""
    accesses = sorted(accesses, key=lambda a: a[0])
    tree = reuse.ByteTree(len(accesses))
    add = tree.add

    def after(i):                      # bytes of the lines last touched after position i
        return live - tree.prefix(i + 1)

    last, dirty, size, live, out = {}, {}, {}, 0.0, 0.0
    for pos, (_t, key, nbytes, is_store) in enumerate(accesses):
        p = last.get(key)
        if p is None:
            live += nbytes
        else:
            if dirty.get(key) and after(p) > min(dirty_reach, lru_bytes):
                out += size[key]
                dirty[key] = False
            add(p, -size[key])
        add(pos, nbytes)
        last[key], size[key] = pos, nbytes
        if is_store:
            dirty[key] = True
    return out + sum(size[k] for k, p in last.items()
                     if dirty.get(k) and after(p) > min(dirty_reach, lru_bytes))


def main(ids) -> None:
    rows = reuse._rows()
    print(f"{'row':48s} {'ncu MB':>7s} {'LRU.70':>15s} {'stack 29.7':>15s}")
    for rid in ids:
        cfg, m = rows[rid]
        problem = AttentionProblem(**{k: cfg[k] for k in PROBLEM_KEYS if k in cfg})
        schedule = build_schedule(problem, reuse.GPU, cfg["algorithm"],
                                  **reuse.row_tiling(cfg, m, reuse.GPU))
        _result, kernels = reuse.logged_replay(schedule)
        meas = float(m["dram_write_bytes"])
        cells = []
        for reach in (LRU_BYTES, DIRTY_STACK_BYTES):
            w = sum(writebacks(k, reach) for k in kernels)
            cells.append(f"{w / 1e6:7.1f} ({w / meas - 1:+6.1%})")
        print(f"{rid:48s} {meas / 1e6:7.1f} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ROWS)
