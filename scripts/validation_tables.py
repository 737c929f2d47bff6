"""Markdown tables of docs/validation.md from `iosim validate --format json`.

    iosim validate --format json > /tmp/validate.json
    iosim validate --dataset published --format json > /tmp/published.json
    python scripts/validation_tables.py /tmp/validate.json /tmp/published.json

Prints the budget table and the per-row tables (H200 rows, with their sweep; published rows);
docs/validation.md holds the output between the `<!-- validation-tables -->` markers. One model:
no factor is fitted, the simulated time is the time `iosim run` prints.
"""
from __future__ import annotations

import json
import sys

BUDGETS = [  # (label, group, key, stat, limit, held-out column)
    ("project L2→SM bytes within 1%", "project", "l2_to_sm_bytes", "max_abs_err", 0.01, False),
    ("project DRAM bytes within 5%", "project", "dram_bytes", "max_abs_err", 0.05, False),
    ("project time MAPE ≤ 6%", "project", "time", "mape", 0.06, True),
    ("project time max ≤ 15%", "project", "time", "max_abs_err", 0.15, True),
    ("torch flash + cuDNN time MAPE ≤ 8%", "external", "time", "mape", 0.08, True),
]


def pct(x, sign: bool = False) -> str:
    if x is None:
        return "—"
    return f"{x * 100:+.1f}%" if sign else f"{x * 100:.1f}%"


def _status(v, limit) -> str:
    return "—" if v is None else ("met" if v <= limit else "not met")


def render(h200: dict, published: dict | None = None) -> str:
    s = h200["summary"]
    out = ["| budget (issue 12) | all rows | held out | status |", "|---|---|---|---|"]
    for name, group, key, stat, limit, held in BUDGETS:
        v = s[group][key][stat]
        hv = s[group]["time_held_out"][stat] if held else None
        worst = max(x for x in (v, hv) if x is not None) if v is not None else None
        out.append(f"| {name} | {'max ' if stat == 'max_abs_err' else ''}{pct(v)} | "
                   f"{pct(hv) if held else ''} | {_status(worst, limit)} |")
    if published:
        p = published["summary"]["published"]["time"]
        out.append(f"| published A100/H100 time MAPE ≤ 12% | {pct(p['mape'])} |  | "
                   f"{_status(p['mape'], 0.12)} |")
        out.append(f"| published A100/H100 time max ≤ 25% | max {pct(p['max_abs_err'])} |  | "
                   f"{_status(p['max_abs_err'], 0.25)} |")
    out += ["", "H200 rows (time err = simulated / measured GPU time − 1; no factor):", "",
            "| id | sweep | split | GPU ms | simulated ms | time err | L2→SM err | DRAM err |",
            "|---|---|---|---|---|---|---|---|"]
    for r in h200["rows"]:
        out.append(f"| {r['id']} | {r.get('dataset', 'sweep')} | "
                   f"{'train' if r['train'] else 'held out'} | {r['measured_time_s'] * 1e3:.3f} | "
                   f"{r['predicted_time_s'] * 1e3:.3f} | {pct(r['time_err'], True)} | "
                   f"{pct(r['l2_err'], True)} | {pct(r['dram_err'], True)} |")
    out += _dram_by_direction(h200["rows"])
    if published:
        out += ["", "Published rows (FA-3 paper Fig. 5, H100 forward; FA-2 paper Figs. 4 and 7, "
                "A100 and H100 fwd+bwd):", "",
                "| id | paper TFLOP/s | predicted TFLOP/s | time err |", "|---|---|---|---|"]
        for r in published["rows"]:
            out.append(f"| {r['id']} | {r['measured_tflops_per_s']:.0f} | "
                       f"{r['predicted_tflops_per_s']:.0f} | {pct(r['time_err'], True)} |")
        out += ["", "| published rows (all; by series, GPU, direction) | n | MAPE | max "
                "| mean signed |",
                "|---|---|---|---|---|"]
        for k, v in published["summary"]["published"].items():
            out.append(f"| {k} | {v['n']} | {pct(v['mape'])} | {pct(v['max_abs_err'])} | "
                       f"{pct(v['mean_signed_err'], True)} |")
    return "\n".join(out)


def _dram_by_direction(rows: list) -> list:
    """The rows beyond the DRAM budget, their reads and write-backs apart."""
    off = [r for r in rows if r.get("dram_err") is not None and abs(r["dram_err"]) > 0.05
           and r.get("dram_read_err") is not None]
    if not off:
        return []
    out = ["", "Rows beyond the DRAM budget, by direction (measured MB: ncu's dram__bytes_read / "
           "_write; errors of the simulator's reads and write-backs):", "",
           "| id | read MB | read err | write MB | write err |", "|---|---|---|---|---|"]
    for r in off:
        out.append(f"| {r['id']} | {r['measured_dram_read_bytes'] / 1e6:.1f} | "
                   f"{pct(r['dram_read_err'], True)} | {r['measured_dram_write_bytes'] / 1e6:.1f} | "
                   f"{pct(r['dram_write_err'], True)} |")
    return out


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python scripts/validation_tables.py VALIDATE.json [PUBLISHED.json]",
              file=sys.stderr)
        return 2
    data = []
    for path in argv:
        try:
            with open(path, encoding="utf-8") as f:
                data.append(json.load(f))
        except (OSError, ValueError) as exc:
            print(f"error: cannot read {path}: {exc}", file=sys.stderr)
            return 2
    print(render(*data))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
