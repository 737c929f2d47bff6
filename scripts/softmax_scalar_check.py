"""The softmax kernel alone against the scalar-path probe (measurements/h200/softmax_scalar/):
each probe row (B 1, H 16, d 128, fp16; N_kv mod 8 = 0: 16-byte path, otherwise the scalar
path; CTAs per SM lowered by the probe's extra dynamic shared memory) simulated as the
softmax kernel launched twice on a warm L2 (the probe times launches back to back: each writes
back the dirty P lines the one before left and leaves its own), at the counted SM clock; the
second launch's time and its launch overhead against the kernel's CUDA-event time (variant 0),
and the load alone (variant 2) against the program's Load alone.

    python scripts/softmax_scalar_check.py [--mode fast|exact] [--without-mechanisms] [--copy]
                                           [--probe h100]

--without-mechanisms: the schedule as it was before softmax_code (one round trip, one
instruction per counted op), for the "before" column of the probe's README.
"""
from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

from iosim.algorithms import build_schedule
from iosim.clock import sustained_simulation
from iosim.problem import AttentionProblem

LOG = Path(__file__).resolve().parents[1] / "measurements/h200/softmax_scalar/softmax_scalar.log"
LINE = re.compile(r"^N\s+(\d+) mod8 (\d) ctas/SM\s+(\d+)\s+kernel\s+([\d.]+) us .* copy\s+([\d.]+)"
                  r"\s+load\s+([\d.]+) us")


def probe_rows(log: Path = LOG) -> list[dict]:
    rows = []
    for line in log.read_text().splitlines():
        m = LINE.match(line)
        if m:
            n, mod, k, us, copy, load = m.groups()
            rows.append({"n": int(n), "mod8": int(mod), "ctas_per_sm": int(k),
                         "kernel_s": float(us) * 1e-6, "copy_s": float(copy) * 1e-6,
                         "load_s": float(load) * 1e-6})
    return rows


def simulate_row(row: dict, gpu: str = "h200-calibrated", mode: str = "fast",
                 load_only: bool = False, copy_only: bool = False) -> float:
    """The model's time for the probe's softmax launch (at its CTAs per SM); load_only: the
    probe's variant 2 (the copy of S into shared memory alone: the program's Load); copy_only:
    its variant 1 (the same loads and stores, no arithmetic: the program's Load and Store)."""
    from iosim.hardware import load_gpu
    g = load_gpu(gpu)
    p = AttentionProblem(batch=row.get("batch", 1), heads_q=row.get("heads", 16), seq_q=row["n"],
                         head_dim=128, dtype="fp16")
    sched = build_schedule(p, g, "standard")
    (k,) = [k for k in sched.kernels if k.name == "std_fwd_softmax"]
    smem_sm = g.shared_memory_per_sm_bytes
    want = row["ctas_per_sm"]
    launch = k.launch
    if want * (launch.smem_bytes_per_cta + 1024) <= smem_sm and want < 16:
        pad = smem_sm // want - 1024 - 64           # as the probe asked for
        launch = dataclasses.replace(launch, smem_bytes_per_cta=max(launch.smem_bytes_per_cta, pad))
    from iosim.algorithms.standard import softmax_program
    from iosim.machine import grid_index, resident_ctas_per_sm
    resident = resident_ctas_per_sm(g, launch)    # the issue efficiency of the probe's occupancy

    def program(cta: int) -> tuple:
        i, b, h = grid_index(cta, launch.grid)
        return softmax_program(p, g, b, h, i, resident)
    k = dataclasses.replace(k, launch=launch, program=program)
    if load_only:
        whole = k.program
        k = dataclasses.replace(k, program=lambda cta: whole(cta)[:1])
    elif copy_only:
        whole = k.program
        k = dataclasses.replace(k, program=lambda cta: tuple(
            op for op in whole(cta) if getattr(op, "kind", "") in ("load", "store")))
    two = dataclasses.replace(sched, kernels=(k, dataclasses.replace(k, name=k.name + "_again")))
    r, at = sustained_simulation(two, g, l2_protocol="warm", time_protocol="warm", mode=mode)
    return r.kernels[1].time_s + at.launch_overhead_s


H100_PROBE = Path(__file__).resolve().parents[1] / "measurements/h100/softmax_issue/softmax_issue.json"


def h100_probe_rows() -> list[dict]:
    """The H100 probe's points (measurements/h100/softmax_issue/): the kernel (variant 0) and
    its copy alone (variant 1) at 1-4 CTAs per SM and its own occupancy, as probe_rows."""
    import json
    rows = {}
    for r in json.loads(H100_PROBE.read_text())["rows"]:
        if r["variant"] in (0, 1):
            key = (r["seq"], r["ctas_per_sm"], r["padded"])
            row = rows.setdefault(key, {"n": r["seq"], "mod8": r["seq"] % 8, "batch": r["batch"],
                                        "heads": r["heads"], "ctas_per_sm": r["ctas_per_sm"]})
            row["kernel_s" if r["variant"] == 0 else "copy_s"] = r["ms"] * 1e-3
    return [r for r in rows.values() if "kernel_s" in r and "copy_s" in r]


def without_mechanisms() -> None:
    """Switch softmax_code's two figures off (one round trip, one instruction per op)."""
    from iosim.algorithms import softmax_code
    softmax_code.row_load_trips = lambda row_bytes: 1
    softmax_code.issued_per_element = lambda n, elem_bytes: 3.0
    softmax_code.issue_efficiency = lambda n, elem_bytes, warps: 1.0
    softmax_code.lone_row_cycles = lambda n, elem_bytes: 0.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", default="fast")
    ap.add_argument("--without-mechanisms", action="store_true")
    ap.add_argument("--copy", action="store_true",
                    help="the copy-only variant (loads and stores, no arithmetic) in place of "
                         "the load alone")
    ap.add_argument("--probe", choices=("h200", "h100"), default="h200",
                    help="h100: the H100 probe of measurements/h100/softmax_issue/ (its rows' "
                         "B and H, 1-4 CTAs per SM and the kernel's own; the copy as second "
                         "column) on the h100 config")
    a = ap.parse_args(argv)
    if a.probe == "h100":
        a.copy = True
    if a.without_mechanisms:
        without_mechanisms()
    second = ("copy_s", "copy only") if a.copy else ("load_s", "load only")
    print(f"{'N':>5} {'mod8':>4} {'CTAs/SM':>7} | kernel: {'measured us':>11} {'model us':>9} "
          f"{'err':>7} | {second[1]}: {'measured us':>11} {'model us':>9} {'err':>7}")
    errs = {"kernel_s": [], second[0]: []}
    gpu = "h100" if a.probe == "h100" else "h200-calibrated"
    for row in h100_probe_rows() if a.probe == "h100" else probe_rows():
        cells = []
        for key, part in (("kernel_s", None), second):
            t = simulate_row(row, gpu, mode=a.mode, load_only=part == "load only",
                             copy_only=part == "copy only")
            err = t / row[key] - 1
            errs[key].append(abs(err))
            cells.append(f"{row[key] * 1e6:11.1f} {t * 1e6:9.1f} {err:+7.1%}")
        print(f"{row['n']:5d} {row['mod8']:4d} {row['ctas_per_sm']:7d} | kernel: {cells[0]} | "
              f"{second[1]}: {cells[1]}")
    for key, name in (("kernel_s", "kernel"), second):
        e = errs[key]
        print(f"{name}: mean |err| {sum(e) / len(e):.1%}, max {max(e):.1%} ({len(e)} rows)")


if __name__ == "__main__":
    main()
