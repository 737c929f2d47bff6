"""Nsight Compute byte counters for the kernels of one run.

`ncu_command(script_args)` builds the command line; `parse_csv(text)` reads ncu's
`--csv --page raw` output into per-kernel rows (`raw_rows(text)`: every column as text). A
profiled process marks the start of each configuration by launching the tiny kernel
`iosim_marker` (see `marker()`), so one ncu run can profile many configurations:
`split_by_marker` cuts the kernel list at the markers.
Clocks are left alone (`--clock-control none`); ncu flushes caches before each kernel replay
(its default `--cache-control all`), so DRAM bytes are those of a cold L2, and dirty lines
still in L2 when a kernel ends are written back outside its measurement (counted by no kernel).
`kernel_rows(config_id, rows)` gives one CSV row per kernel (KERNEL_FIELDS), for
iosim/data/validation/measured_h200_kernels.csv.
"""
from __future__ import annotations

import csv
import io

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "l1tex__m_xbar2l1tex_read_bytes.sum",
           "lts__t_bytes.sum", "gpu__time_duration.sum")
COLUMNS = {"dram__bytes_read.sum": "dram_read_bytes", "dram__bytes_write.sum": "dram_write_bytes",
           "l1tex__m_xbar2l1tex_read_bytes.sum": "l2_to_sm_read_bytes",
           "lts__t_bytes.sum": "lts_bytes", "gpu__time_duration.sum": "ncu_time_s"}
UNIT = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
        "KB": 1e3, "MB": 1e6, "GB": 1e9, "B": 1, "nsecond": 1e-9, "usecond": 1e-6,
        "msecond": 1e-3, "second": 1, "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}
MARKER = "iosim_marker"


def ncu_command(python_args: list, output_csv: str | None = None, metrics=METRICS,
                kernel_regex: str | None = None) -> list:
    """ncu over `python3 python_args` (clocks left alone, raw page in base units); `metrics`
    and a `--kernel-name regex:` filter where a probe needs its own."""
    return ["ncu", "--clock-control", "none", "--metrics", ",".join(metrics), "--csv",
            "--page", "raw", "--print-units", "base",
            *(["--kernel-name", f"regex:{kernel_regex}"] if kernel_regex else []),
            *(["--log-file", output_csv] if output_csv else []), "python3", *python_args]


def marker():
    """Launch the marker kernel (call right before each configuration's profiled run)."""
    import cupy as cp
    k = cp.RawKernel('extern "C" __global__ void iosim_marker(int* x) { if (x) *x = 0; }', MARKER)
    k((1,), (32,), (cp.zeros(1, dtype=cp.int32),))


def raw_rows(text: str) -> list:
    """ncu --csv --page raw → one {column: text} dict per profiled kernel, in launch order
    (the units row that --print-units writes under the header is left out)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not lines:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, body = rows[0], rows[1:]
    if body and not body[0][0].strip().isdigit():   # a units row follows the header
        body = body[1:]
    return [dict(zip(header, r)) for r in body]


def units_row(text: str) -> dict:
    """The {column: unit} row under the header of ncu's raw page ({} where it has none)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines[:2]))))
    if len(rows) < 2 or rows[1][0].strip().isdigit():
        return {}
    return dict(zip(rows[0], rows[1]))


def parse_csv(text: str) -> list:
    """ncu --csv --page raw → [{'kernel': name, 'dram_read_bytes': ..., ...}] in launch order."""
    units = units_row(text)
    out = []
    for r in raw_rows(text):
        rec = {"kernel": r["Kernel Name"] if "Kernel Name" in r else
               r.get("Function Name", next(iter(r.values()), ""))}
        for h, name in (("Grid Size", "grid"), ("Block Size", "block")):
            if h in r:
                rec[name] = r[h].replace(" ", "")
        for m, name in COLUMNS.items():
            if m in r:
                try:
                    v = float(r[m].replace(",", ""))
                except ValueError:
                    v = float("nan")
                rec[name] = v * UNIT.get(units.get(m, ""), 1)
        out.append(rec)
    return out


def split_by_marker(rows: list) -> list:
    """Kernel rows grouped per configuration (each group starts after a marker)."""
    groups, cur = [], None
    for r in rows:
        if r["kernel"].startswith(MARKER):
            cur = []
            groups.append(cur)
        elif cur is not None:
            cur.append(r)
    return groups


KERNEL_FIELDS = ["id", "kernel_index", "kernel", "grid", "block", "ncu_time_s", "dram_read_bytes",
                 "dram_write_bytes", "l2_to_sm_read_bytes", "lts_bytes"]


def kernel_rows(config_id: str, rows: list) -> list:
    """One row per kernel of a configuration, in launch order (full kernel names)."""
    return [{"id": config_id, "kernel_index": i, **{k: r.get(k, "") for k in KERNEL_FIELDS[2:]}}
            for i, r in enumerate(rows)]


def totals(rows: list) -> dict:
    """Sum of every metric over the kernels of one configuration."""
    out = {name: sum(r.get(name, 0.0) for r in rows) for name in COLUMNS.values()}
    out["kernels"] = ";".join(r["kernel"][:40] for r in rows)
    return out
