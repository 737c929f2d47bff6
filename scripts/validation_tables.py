"""Markdown tables of docs/validation.md from `iosim validate --format json`.

    iosim validate --format json > /tmp/validate.json
    python scripts/validation_tables.py /tmp/validate.json

Prints the budget table, the efficiency factors and the per-row table; docs/validation.md
holds their output between the `<!-- validation-tables -->` markers.
"""
from __future__ import annotations

import json
import sys

BUDGETS = [("project L2→SM bytes within 2%", "project", "l2_to_sm_bytes", "max_abs_err", False),
           ("project DRAM bytes within 10%", "project", "dram_bytes", "max_abs_err", False),
           ("project time MAPE ≤ 10%", "project", "time", "mape", True),
           ("project time max ≤ 20%", "project", "time", "max_abs_err", True),
           ("external time MAPE ≤ 15%", "external", "time", "mape", True)]


def pct(x: float, sign: bool = False) -> str:
    return f"{x * 100:+.1f}%" if sign else f"{x * 100:.1f}%"


def render(d: dict) -> str:
    s = d["summary"]
    out = ["| budget (issue 5) | all rows | held out | status |", "|---|---|---|---|"]
    for name, group, key, stat, held in BUDGETS:
        held_out = pct(s[group]["time_held_out"][stat]) if held else ""
        out.append(f"| {name} | {'max ' if stat == 'max_abs_err' else ''}{pct(s[group][key][stat])}"
                   f" | {held_out} | {'not met' if d['budget_failures'] else 'met'} |")
    out += ["", f"Uncalibrated (simulated time before the efficiency factors): project MAPE "
                f"{pct(s['project']['time_uncalibrated']['mape'])}, external "
                f"{pct(s['external']['time_uncalibrated']['mape'])}.", "",
            "Efficiency factors (measured / simulated, training rows):", "",
            "| group | factor |", "|---|---|"]
    out += [f"| {g} | {f:.3f} |" for g, f in sorted(d["efficiency_factors"].items())]
    out += ["", "Per row (time err after calibration; raw = before the factors; L2→SM and DRAM "
                "are never fitted):", "",
            "| id | split | event ms | GPU ms | simulated ms (calibrated) | time err | "
            "raw time err | L2→SM err | DRAM err |", "|---|---|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        out.append(f"| {r['id']} | {'train' if r['train'] else 'test'} | "
                   f"{r['event_time_s'] * 1e3:.3f} | {r['measured_time_s'] * 1e3:.3f} | "
                   f"{r['calibrated_time_s'] * 1e3:.3f} | {pct(r['time_err'], True)} | "
                   f"{pct(r['raw_time_err'], True)} | {pct(r['l2_err'], True)} | "
                   f"{pct(r['dram_err'], True)} |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/validation_tables.py VALIDATE.json", file=sys.stderr)
        return 2
    try:
        with open(argv[0], encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        print(f"error: cannot read {argv[0]}: {exc}", file=sys.stderr)
        return 2
    print(render(data))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
