"""The fixed-cost probe's Nsight Compute run as the probe's JSON rows: each shape's second
launch (`cta_fixed_cost_h200.py --ncu` launches each twice), its gpu__time_duration as time_s
and its SM clock (sm__cycles_elapsed.avg.per_second), the shapes' other fields taken from the
CUDA-event JSON of the same call.

    python scripts/cta_fixed_cost_ncu_json.py measurements/h100/cta_fixed_cost/cta_fixed_cost_ncu.csv \
        measurements/h100/cta_fixed_cost/cta_fixed_cost_events.json > measurements/h100/cta_fixed_cost/cta_fixed_cost_ncu.json
"""
from __future__ import annotations

import json
import sys

from iosim.measure.ncu import raw_rows


def number(text: str) -> float:
    return float(text.replace(",", ""))


def main(ncu_csv: str, events_json: str) -> None:
    rows = raw_rows(open(ncu_csv).read())
    shapes = json.load(open(events_json))
    if len(rows) != 2 * len(shapes):
        raise SystemExit(f"expected {2 * len(shapes)} kernels, got {len(rows)}")
    out = []
    for i, shape in enumerate(shapes):
        r = rows[2 * i + 1]
        rec = {k: v for k, v in shape.items() if not k.startswith("time_")}
        rec.update(time_s=number(r["gpu__time_duration.sum"]) * 1e-9,
                   event_time_s=shape["time_s"],
                   sm_clock_hz=number(r["sm__cycles_elapsed.avg.per_second"]),
                   sm_active_fraction=number(r["sm__cycles_active.avg"]) / number(r["sm__cycles_elapsed.avg"]),
                   dram_read_bytes=number(r["dram__bytes_read.sum"]),
                   dram_write_bytes=number(r["dram__bytes_write.sum"]))
        out.append(rec)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(*sys.argv[1:3])
