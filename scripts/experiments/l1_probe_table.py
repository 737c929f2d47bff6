"""The L1 probe's table: one row per launch (scripts/experiments/l1_probe_h200.py), its
shared-memory configuration, L1 capacity (256 KB less it), stack distance of the statistic
lines, and the measured hit fraction of their cp.async.ca sectors.
    python3 scripts/experiments/l1_probe_table.py LAUNCHES.json NCU.csv [--csv OUT.csv]"""
from __future__ import annotations

import csv
import json
import sys

ACCESS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_access.sum"
HIT = "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_access_lookup_hit.sum"
CONFIG = "launch__shared_mem_config_size"


def num(s: str) -> float:
    return float(s.replace(",", ""))


def rows(launches_json: str, ncu_csv: str) -> list[dict]:
    launches = json.load(open(launches_json))["launches"]
    lines = [ln for ln in open(ncu_csv) if not ln.startswith("==")]
    recs = list(csv.DictReader(lines))[1:]          # the first row after the header: units
    if len(recs) != len(launches):
        raise SystemExit(f"{len(recs)} profiled launches, {len(launches)} in the list")
    out = []
    for x, r in zip(launches, recs):
        cfg = num(r[CONFIG])
        acc, hit = num(r[ACCESS]), num(r[HIT])
        out.append({**x, "config_bytes": int(cfg), "l1_bytes": int(256 * 1024 - cfg),
                    "ca_sectors": int(acc), "hit_sectors": int(hit), "hit_fraction": hit / acc})
    return out


def main(argv: list[str]) -> None:
    rs = rows(argv[0], argv[1])
    print(f"{'cfg KB':>6} {'L1 KB':>6} {'mode':>4} {'fill':>6} {'n':>3} {'dist KB':>8} "
          f"{'dist/L1':>7} {'sectors':>8} {'hit':>6}")
    for r in rs:
        print(f"{r['config_bytes'] / 1024:6.0f} {r['l1_bytes'] / 1024:6.0f} {r['mode']:4d} "
              f"{r['fill']:6d} {r['n']:3d} {r['stack_distance_bytes'] / 1024:8.2f} "
              f"{r['stack_distance_bytes'] / r['l1_bytes']:7.3f} {r['ca_sectors']:8d} "
              f"{r['hit_fraction']:6.3f}")
    if "--csv" in argv:
        keys = list(rs[0])
        with open(argv[argv.index("--csv") + 1], "w", newline="") as f:
            w = csv.DictWriter(f, keys)
            w.writeheader()
            w.writerows(rs)


if __name__ == "__main__":
    main(sys.argv[1:])
