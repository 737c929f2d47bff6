"""Complete a decode measurement CSV with the rows another run measured and this one lacks.

    python3 scripts/merge_decode_rows.py NEW.csv OLD.csv OUT.csv

Rows of NEW.csv are kept as measured; every row of OLD.csv whose `id` NEW.csv lacks is appended
unchanged (same columns required). Used for the 2026-12-01 decode re-measure: the second
device call's time step ran past its limit before the two FA-2 decode rows were profiled by
ncu, and FA-2's kernel had not changed since the first call, whose rows are taken."""
from __future__ import annotations

import csv
import sys


def main(new: str, old: str, out: str) -> None:
    with open(new, newline="") as f:
        head, *rows = list(csv.reader(f))
    with open(old, newline="") as f:
        head_old, *rows_old = list(csv.reader(f))
    if head != head_old:
        sys.exit("merge_decode_rows: the two CSVs have different columns")
    have = {r[0] for r in rows}
    rows += [r for r in rows_old if r[0] not in have]
    with open(out, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(head)
        w.writerows(rows)


if __name__ == "__main__":
    main(*sys.argv[1:4])
