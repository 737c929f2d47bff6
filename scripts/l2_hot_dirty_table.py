"""The hot-set dirty probe's kept dirty bytes against the model's L2 replaying the same accesses.

    python scripts/l2_hot_dirty_table.py measurements/h200/l2_hot_dirty/l2_hot_dirty_probe.csv

For each configuration of scripts/experiments/l2_hot_dirty_probe.py (64 rounds per CTA of: read a
share of a clean stream, re-read a slice of a small hot buffer, write a share of A) the measured
dirty bytes still in L2 at the kernel's end (written - DRAM write bytes), beside the model's: the
same accesses, in round order and CTA order within a round, at 1 KiB granularity, through
`memory.TileLru` (an LRU of L2_EFFECTIVE_FRACTION x the config's capacity with the dirty limit
L2_DIRTY_FRACTION), as exact mode replays them. The spin-wait rows have the same accesses as
their no-spin counterparts: the model has no time in its L2 policy, so any difference between
them measured is a mechanism it lacks.
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path

from iosim import load_gpu
from iosim.sim.memory import L2_EFFECTIVE_FRACTION, TileLru, l2_dirty_capacity_bytes

MIB = 1 << 20
CTAS, ROUNDS, VEC = 528, 64, 16
BLOCK = 1024


def model_kept_bytes(gpu, written: int, streamed: int, hot: int, hot_read: int) -> float:
    lru = TileLru(L2_EFFECTIVE_FRACTION * gpu.l2_capacity_bytes, l2_dirty_capacity_bytes(gpu))
    na, nb, nhot = written // VEC, streamed // VEC, hot // VEC
    pa, pb = -(-na // CTAS), -(-nb // CTAS)
    ra, rb = -(-pa // ROUNDS), -(-pb // ROUNDS)
    per_round = hot_read // VEC // (CTAS * ROUNDS)
    written_back = 0

    def touch(buf: str, v0: int, v1: int, store: bool) -> int:
        wb = 0
        for blk in range(v0 * VEC // BLOCK, -(-v1 * VEC // BLOCK)):
            key = (buf, blk)
            e = lru.lookup(key)
            if e is None:
                wb += lru.insert(key, BLOCK, store, 0.0)
            elif store:
                wb += lru.mark_dirty(key, e)
        return wb

    for r in range(ROUNDS):
        for c in range(CTAS):
            a0, a1 = c * pa, min(na, c * pa + pa)
            b0, b1 = c * pb, min(nb, c * pb + pb)
            x0 = min(a1, a0 + r * ra); x1 = min(a1, x0 + ra)
            y0 = min(b1, b0 + r * rb); y1 = min(b1, y0 + rb)
            if y1 > y0:
                written_back += touch("B", y0, y1, False)
            if nhot and per_round:
                h0 = ((c * 37 + r * 11) * per_round) % nhot
                h1 = h0 + per_round
                written_back += touch("H", h0, min(h1, nhot), False)
                if h1 > nhot:
                    written_back += touch("H", 0, h1 - nhot, False)
            if x1 > x0:
                written_back += touch("A", x0, x1, True)
    return written - written_back


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--gpu", default="h200")
    args = ap.parse_args(argv)
    gpu = load_gpu(args.gpu)
    with open(args.csv, newline="") as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    print(f"# dirty MiB kept at the kernel's end ({args.csv}); model: {gpu.name}, TileLru of "
          f"{L2_EFFECTIVE_FRACTION * gpu.l2_capacity_bytes / MIB:.1f} MiB, dirty limit "
          f"{l2_dirty_capacity_bytes(gpu) / MIB:.1f} MiB")
    print(f"{'W':>4s} {'S':>4s} {'hot':>4s} {'hot_rd':>7s} {'spin':>6s} {'time_us':>8s} "
          f"{'hot_share':>9s} {'kept':>6s} {'model':>6s}")
    for r in rows:
        w, s, h, hr = (int(r[k]) for k in ("written_bytes", "streamed_bytes", "hot_bytes",
                                           "hot_read_bytes"))
        kept = w - r["dram_write_bytes"]
        model = model_kept_bytes(gpu, w, s, h, hr)
        share = hr / (w + s + hr)
        print(f"{w / MIB:4.0f} {s / MIB:4.0f} {h / MIB:4.0f} {hr / MIB:7.0f} "
              f"{int(r['spin_cycles_per_round']):6d} {r['ncu_time_s'] * 1e6:8.1f} {share:9.1%} "
              f"{kept / MIB:6.1f} {model / MIB:6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
