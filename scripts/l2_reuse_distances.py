"""Reuse distances of the L2 accesses of validation rows, and what the H200's L2 probe says
they would miss (evidence for issue 12's DRAM-byte budget; not part of the model).

For each row: the schedule `iosim validate` predicts it with is replayed in exact mode under the
ncu protocol (every L2 access logged; one kernel at a time, the L2 invalidated in between);
each load's LRU stack distance D is the bytes of distinct tiles touched since that tile was
last touched (Mattson et al. 1970; the tiles are the schedule's, keyed (tensor, *coord)). It
prints the exact LRU's DRAM reads (`l2_effective_fraction` 0.70), the byte-weighted quantiles
of D over the reuses, and the reads a cache would make whose reuse at distance f·D misses with
the probability the probe measured for a buffer of f·D bytes re-read from SMs all over the
chip (`read_rotating`, iosim/data/validation/l2_probe.csv: 2% at 32 MiB, 17% at 40, 55% at 48,
91% at 56): f = 1 (the probe's curve as measured) and f = 2 (each of the two L2 partitions
holding its own copy of a line both halves of the chip read, an upper bound). Measured reads
are the row's ncu figure.

    python scripts/l2_reuse_distances.py [ROW_ID ...]      (default: ROWS below)
"""
from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from iosim.algorithms import build_schedule                      # noqa: E402
from iosim.analysis.validate import row_tiling                   # noqa: E402
from iosim.problem import PROBLEM_KEYS, AttentionProblem         # noqa: E402
from iosim.sim import memory, simulate                           # noqa: E402

GPU = "h200-calibrated"
DATA = ROOT / "iosim" / "data" / "validation"
ROWS = ["torch_flash-fa2-fwd-N1024-d128-full", "torch_flash-fa2-fwd-N1024-d128-causal",
        "torch_flash-fa2-fwd-N4096-d128-full", "torch_flash-fa2-fwd-N4096-d128-causal",
        "torch_flash-fa2-fwd-N16384-d128-causal",
        "iosim-fa2-fwd-N2048-d128-causal", "iosim-fa2-fwd-N8192-d128-causal",
        "iosim-fa2-fwd-N8192-d128-full"]


def _rows() -> dict:
    import yaml
    out = {}
    for sweep in sorted(DATA.glob("sweep*.yaml")):
        topic = sweep.stem.removeprefix("sweep").removeprefix("_") or None
        meas = DATA / (f"measured_h200_{topic}.csv" if topic else "measured_h200.csv")
        if not meas.is_file():
            continue
        m = {r["id"]: r for r in csv.DictReader(open(meas))}
        for cfg in yaml.safe_load(open(sweep))["configs"]:
            if cfg["id"] in m:
                out[cfg["id"]] = (cfg, m[cfg["id"]])
    return out


def probe_curve(variant: str = "read_rotating"):
    """(buffer bytes, miss fraction of a re-read) from the L2 probe."""
    xs, ys = [0.0], [0.0]
    for r in csv.DictReader(open(DATA / "l2_probe.csv")):
        if r["variant"] == variant:
            b, n = float(r["buffer_bytes"]), int(r["passes"])
            xs.append(b)
            ys.append(min(1.0, max(0.0, (float(r["dram_read_bytes"]) - b) / ((n - 1) * b))))
    return np.array(xs), np.array(ys)


def logged_replay(schedule):
    """Exact-mode replay under the ncu protocol; the L2 accesses, one list per kernel."""
    log, kernels = [], []
    cls = memory.ExactMemory
    load, store, invalidate = cls.load, cls.store, cls.invalidate

    def logged_load(self, key, tensor, nbytes, now_s, *args, **kwargs):
        log.append((now_s, key, nbytes, False))
        return load(self, key, tensor, nbytes, now_s, *args, **kwargs)

    def logged_store(self, key, tensor, nbytes, reduce, now_s, *args, **kwargs):
        log.append((now_s, key, nbytes, True))
        return store(self, key, tensor, nbytes, reduce, now_s, *args, **kwargs)

    def logged_invalidate(self):
        if log:
            kernels.append(list(log))
            log.clear()
        return invalidate(self)

    cls.load, cls.store, cls.invalidate = logged_load, logged_store, logged_invalidate
    try:
        result = simulate(schedule, GPU, mode="exact", l2_protocol="ncu")
    finally:
        cls.load, cls.store, cls.invalidate = load, store, invalidate
    if log:
        kernels.append(list(log))
    return result, kernels


class ByteTree:
    """A Fenwick tree of bytes by access position: add(i, v), and prefix(i), the bytes at
    positions < i (what LRU stack distances are summed from)."""

    def __init__(self, n: int):
        self.n, self.tree = n, np.zeros(n + 1)

    def add(self, i: int, v: float) -> None:
        i += 1
        while i <= self.n:
            self.tree[i] += v
            i += i & -i

    def prefix(self, i: int) -> float:
        s = 0.0
        while i > 0:
            s += self.tree[i]
            i -= i & -i
        return s


def reuse_distances(accesses):
    """(cold load bytes, [(distance bytes, load bytes)] of every load that reuses a tile)."""
    accesses = sorted(accesses, key=lambda a: a[0])
    tree = ByteTree(len(accesses))
    add, prefix = tree.add, tree.prefix

    last, live, cold, reuses = {}, 0.0, 0.0, []
    for pos, (_t, key, nbytes, is_store) in enumerate(accesses):
        p = last.get(key)
        if p is None:
            live += nbytes
            if not is_store:
                cold += nbytes
        else:
            if not is_store:
                reuses.append((live - prefix(p + 1), nbytes))
            add(p, -nbytes)
        add(pos, nbytes)
        last[key] = pos
    return cold, reuses


def main(ids) -> None:
    rows = _rows()
    xs, ys = probe_curve()
    print(f"{'row':50s} {'meas':>7s} {'LRU.70':>7s} {'probe f1':>8s} {'f2':>7s}   "
          f"reuse distance MiB (byte quantiles .5/.9/.99/max)")
    for rid in ids:
        cfg, m = rows[rid]
        t0 = time.process_time()
        problem = AttentionProblem(**{k: cfg[k] for k in PROBLEM_KEYS if k in cfg})
        schedule = build_schedule(problem, GPU, cfg["algorithm"], **row_tiling(cfg, m, GPU))
        result, kernels = logged_replay(schedule)
        cold, est1, est2, dist = 0.0, 0.0, 0.0, []
        for acc in kernels:
            c, reuses = reuse_distances(acc)
            cold += c
            if reuses:
                d = np.array([r[0] for r in reuses])
                w = np.array([r[1] for r in reuses], dtype=float)
                est1 += float((w * np.interp(d, xs, ys, right=1.0)).sum())
                est2 += float((w * np.interp(2 * d, xs, ys, right=1.0)).sum())
                dist.append((d, w))
        d = np.concatenate([x[0] for x in dist])
        w = np.concatenate([x[1] for x in dist])
        order = np.argsort(d)
        cum = np.cumsum(w[order]) / w.sum()
        qs = [d[order][min(len(d) - 1, int(np.searchsorted(cum, q)))] / 2**20
              for q in (0.5, 0.9, 0.99, 1.0)]
        print(f"{rid:50s} {float(m['dram_read_bytes']) / 1e6:7.1f} "
              f"{result.dram_read_bytes / 1e6:7.1f} {(cold + est1) / 1e6:8.1f} "
              f"{(cold + est2) / 1e6:7.1f}   " + " / ".join(f"{q:.1f}" for q in qs)
              + f"   ({time.process_time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ROWS)
