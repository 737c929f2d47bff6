"""The per-CTA timeline: one row per CTA (both modes), kept in compact typed arrays until a
report asks for a pandas DataFrame.

Columns: kernel (index in the schedule), cta (linear launch index), sm, start_s, end_s, then
the CTA's phase times: memory_stall_s, tensor_stall_s, exp_stall_s, alu_stall_s (time its first
thread was blocked on each) and tensor_s, exp_s, alu_s (its own work on each unit at the SM's
full rate). In fast mode start/end come from the fluid dispatch simulation and the phase times
from the micro-simulated CTA class (see docs/simulator.md).

A kernel in a steady state repeats one period of CTAs many times (fluid.Repeat): those rows
are kept once with their repeat count and shifts, so a timeline of millions of CTAs costs the
rows of its transients; sums are exact closed forms and `to_dataframe` expands every row.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass

INT_COLUMNS = ("kernel", "cta", "sm")
FLOAT_COLUMNS = ("start_s", "end_s", "memory_stall_s", "tensor_stall_s", "exp_stall_s",
                 "alu_stall_s", "tensor_s", "exp_s", "alu_s")
COLUMNS = INT_COLUMNS + FLOAT_COLUMNS


@dataclass(frozen=True)
class RepeatedRows:
    """`rows` (as flat tuples in COLUMNS order) again `times` times, copy k (1..times) with
    cta + k·cta_step and start/end + k·time_step_s."""

    rows: tuple
    times: int
    cta_step: int
    time_step_s: float

    def __len__(self) -> int:
        return self.times * len(self.rows)

    def column_sum(self, name: str) -> float:
        i = COLUMNS.index(name)
        base = 0.0
        for r in self.rows:
            base += r[i]
        total = self.times * base
        tri = self.times * (self.times + 1) / 2 * len(self.rows)
        if name in ("start_s", "end_s"):
            total += self.time_step_s * tri
        elif name == "cta":
            total += self.cta_step * tri
        return total

    def expanded(self):
        t = COLUMNS.index("start_s")
        for k in range(1, self.times + 1):
            dc, ds = k * self.cta_step, k * self.time_step_s
            for r in self.rows:
                yield (r[0], r[1] + dc, r[2], r[t] + ds, r[t + 1] + ds, *r[t + 2:])


def _flat(row) -> tuple:
    """(kernel, cta, sm, start_s, end_s, stall4, busy3) → a flat tuple in COLUMNS order."""
    return (*row[:5], *row[5][:4], *row[6][:3])


class Timeline:
    def __init__(self):
        self.columns = {c: array("q") for c in INT_COLUMNS}
        self.columns.update({c: array("d") for c in FLOAT_COLUMNS})
        self.kernel_names: list[str] = []
        self.repeats: list[RepeatedRows] = []

    def add(self, kernel: int, cta: int, sm: int, start_s: float, end_s: float,
            stall: list, busy: tuple) -> None:
        c = self.columns
        c["kernel"].append(kernel)
        c["cta"].append(cta)
        c["sm"].append(sm)
        c["start_s"].append(start_s)
        c["end_s"].append(end_s)
        c["memory_stall_s"].append(stall[0])
        c["tensor_stall_s"].append(stall[1])
        c["exp_stall_s"].append(stall[2])
        c["alu_stall_s"].append(stall[3])
        c["tensor_s"].append(busy[0])
        c["exp_s"].append(busy[1])
        c["alu_s"].append(busy[2])

    def extend_in_order(self, rows: list) -> None:
        """Append rows given as (kernel, cta, sm, start_s, end_s, stall, busy) tuples."""
        c = self.columns
        for i, name in enumerate(("kernel", "cta", "sm", "start_s", "end_s")):
            c[name].extend([r[i] for r in rows])
        for i, name in enumerate(("memory_stall_s", "tensor_stall_s", "exp_stall_s",
                                  "alu_stall_s")):
            c[name].extend([r[5][i] for r in rows])
        for i, name in enumerate(("tensor_s", "exp_s", "alu_s")):
            c[name].extend([r[6][i] for r in rows])

    def add_kernel(self, rows: list, repeats=()) -> None:
        """One kernel's rows (kernel, cta, sm, start_s, end_s, stall, busy) in any order, and
        the fluid.Repeat records of the periods its steady state skipped."""
        for rep in repeats:
            self.repeats.append(RepeatedRows(tuple(_flat(r) for r in rows[rep.first:rep.last]),
                                             rep.times, rep.cta_step, rep.time_step_s))
        self.extend_in_order(sorted(rows, key=lambda r: r[1]))

    def __len__(self) -> int:
        return len(self.columns["cta"]) + sum(len(r) for r in self.repeats)

    def sorted_by_kernel_cta(self) -> "Timeline":
        """Rows in (kernel, cta) order, so that both modes list CTAs alike."""
        kernel, cta = self.columns["kernel"], self.columns["cta"]
        order = sorted(range(len(self)), key=lambda r: (kernel[r], cta[r]))
        out = Timeline()
        out.kernel_names = list(self.kernel_names)
        out.repeats = list(self.repeats)
        for name, col in self.columns.items():
            out.columns[name] = array(col.typecode, (col[r] for r in order))
        return out

    def column_sum(self, name: str) -> float:
        total = 0.0
        for v in self.columns[name]:    # fixed order: deterministic float sum
            total += v
        for rep in self.repeats:
            total += rep.column_sum(name)
        return total

    def to_dataframe(self):
        import numpy as np
        import pandas as pd

        data = {name: np.frombuffer(col, dtype=np.int64 if col.typecode == "q" else np.float64)
                .copy() for name, col in self.columns.items()}
        if self.repeats:
            extra = [r for rep in self.repeats for r in rep.expanded()]
            for i, name in enumerate(COLUMNS):
                data[name] = np.concatenate([data[name], np.array([r[i] for r in extra],
                                                                   dtype=data[name].dtype)])
            order = np.lexsort((data["cta"], data["kernel"]))
            data = {name: col[order] for name, col in data.items()}
        df = pd.DataFrame(data, columns=list(COLUMNS))
        names = self.kernel_names
        df.insert(1, "kernel_name", [names[k] for k in data["kernel"]] if names else "")
        return df
