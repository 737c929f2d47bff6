"""The figures of measurements/h100/copy_wavefronts/ as a table: per kernel (torch's flash
forward, the project's fa2_fwd.cu, the standard softmax) Nsight Compute's counts per unit of
work, and for the softmax its L2 → SM bytes against the schedule's (softmax_code.
row_read_bytes).

    python scripts/copy_wavefronts_table.py     # output: benchmarks/results/copy_wavefronts.txt
"""
from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "measurements/h100/copy_wavefronts"


def ncu_blocks(path: Path) -> dict:
    """'## name' blocks of an Nsight Compute raw CSV → {name: {metric: value}} (the profiled
    kernel's row, iosim.measure.ncu.raw_rows; blocks whose run printed no row are left out)."""
    from iosim.measure.ncu import raw_rows
    out = {}
    for block in path.read_text().split("## ")[1:]:
        name, rest = block.split("\n", 1)
        rows = raw_rows(rest)
        if rows:
            out[name.strip()] = {k: _num(v) for k, v in rows[0].items()}
    return out


def _num(v: str):
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return v


def softmax_rows() -> list:
    """(N, batch, heads, S bytes, requested-sector bytes, L2 → SM bytes) per profiled launch."""
    out = []
    for name, m in ncu_blocks(DATA / "softmax_sectors_ncu.csv").items():
        _, n, b, h = name.split()
        n, b, h = int(n), int(b), int(h)
        out.append((n, b, h, b * h * n * n * 2,
                    32 * m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"],
                    m["l1tex__m_xbar2l1tex_read_bytes.sum"]))
    return out


def validation_softmax_rows() -> list:
    """(row id, N, the schedule's softmax L2 → SM bytes over Nsight Compute's) for every
    standard row of the H200 validation whose softmax kernel is in its per-kernel file."""
    import csv
    import yaml
    from iosim.algorithms import build_schedule
    from iosim.analysis.validate import sweep_pairs
    from iosim.problem import PROBLEM_KEYS, AttentionProblem
    out = []
    for _topic, sweep, measured in sweep_pairs():
        configs = {c["id"]: c for c in yaml.safe_load(sweep.read_text())["configs"]}
        kernels = measured.with_name(measured.stem + "_kernels.csv")
        if not kernels.is_file():
            continue
        for r in csv.DictReader(kernels.open()):
            c = configs.get(r["id"])
            if r["kernel"] != "std_softmax" or c is None:
                continue
            p = AttentionProblem(**{k: c[k] for k in PROBLEM_KEYS if k in c})
            k = next(k for k in build_schedule(p, "h200-calibrated", "standard").kernels
                     if k.name == "std_fwd_softmax")
            out.append((r["id"], p.seq_kv,
                        k.totals().bytes_loaded / float(r["l2_to_sm_read_bytes"])))
    return out


# flash-attention's forward tiles on an H100 (validate.implementation_tiling), used for both
# kernels of the timing rows
TILES = {64: dict(block_q=128, block_kv=128, warps=4), 128: dict(block_q=128, block_kv=64, warps=4)}


def timed_rows() -> list:
    """The timing rows of a d the project's kernels run (64, 128)."""
    rows = json.loads((DATA / "copy_times_h100.json").read_text())
    return [r for r in rows if "time_s" in r and r["d"] in TILES]


def predicted_s(row: dict) -> float:
    """The `h100` config's time for a timing row (warm protocol, its clock law): torch's rows
    as flash-attention's kernel (`kernel="torch-flash"`), the others as fa2_fwd.cu."""
    from iosim.algorithms import build_schedule
    from iosim.clock import sustained_simulation
    from iosim.hardware import load_gpu
    from iosim.problem import AttentionProblem
    p = AttentionProblem(batch=row["batch"], heads_q=row["heads"], seq_q=row["n"],
                         head_dim=row["d"])
    kw = dict(TILES[row["d"]], **({"kernel": "torch-flash"} if row["kernel"] == "torch" else {}))
    s = build_schedule(p, "h100", "fa2", **kw)
    return sustained_simulation(s, load_gpu("h100"), time_protocol="warm")[0].time_s


def main() -> None:
    from iosim.algorithms import softmax_code as sc
    times = json.loads((DATA / "copy_times_h100.json").read_text())
    print("CUDA events (H100), us: torch's flash forward against fa2_fwd.cu at the same tiles")
    by = {(r["d"], r["n"], r["batch"], r["heads"]): {} for r in times}
    for r in times:
        by[(r["d"], r["n"], r["batch"], r["heads"])][r["kernel"]] = r.get("time_s")
    for (d, n, b, h), k in by.items():
        t, f = k.get("torch"), k.get("fa2")
        ratio = f"{f / t:.3f}" if t and f else "  -  "
        print(f"  d {d:3d} N {n:5d} B {b} H {h:2d}: torch {t * 1e6 if t else float('nan'):7.1f}"
              f"  fa2_fwd {f * 1e6 if f else float('nan'):7.1f}  fa2/torch {ratio}")
    print("\nthe h100 config against those times")
    for r in timed_rows():
        t = predicted_s(r)
        print(f"  {r['kernel']:5s} d {r['d']:3d} N {r['n']:5d}: measured {r['time_s'] * 1e6:7.1f}"
              f"  model {t * 1e6:7.1f} us ({t / r['time_s'] - 1:+.1%})")
    print("\nNsight Compute (H100), per CTA and KV step")
    cols = (("inst", "smsp__inst_executed.sum"), ("ldgsts", "smsp__inst_executed_op_ldgsts.sum"),
            ("ldsm", "smsp__inst_executed_op_ldsm.sum"),
            ("wf", "l1tex__data_pipe_lsu_wavefronts.sum"),
            ("local ld B", "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"),
            ("local st B", "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"))
    print(f"  {'kernel':12s}" + "".join(f"{c:>12s}" for c, _ in cols)
          + f"{'pipe %':>8s}{'L2 wr MB':>10s}{'DRAM wr MB':>11s}")
    steps = {"d64": 16 * 2 * 16 * 16, "d128": 16 * 2 * 16 * 32, "d256": 32 * 2 * 8 * 32}
    for name, m in ncu_blocks(DATA / "copy_wavefronts_ncu.csv").items():
        n_steps = steps[name.split()[1]]
        print(f"  {name:12s}" + "".join(f"{m.get(k, 0.0) / n_steps:12.1f}" for _, k in cols)
              + f"{m['l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed']:8.1f}"
              + f"{m['lts__t_sectors_srcunit_tex_op_write.sum'] * 32 / 1e6:10.1f}"
              + f"{m['dram__bytes_write.sum'] / 1e6:11.1f}")
    print("\nstandard softmax, 16-byte path: bytes over S's (requested sectors, L2 → SM; nothing "
          "kept by the L1; the h100 schedule's, earlier trips' sectors kept by the probe curve)")
    from iosim.algorithms import build_schedule
    from iosim.problem import AttentionProblem
    for n, b, h, s, req, xbar in softmax_rows():
        model = sc.rows_read_bytes(0, 2, 2 * n) / (4 * n)
        k = next(k for k in build_schedule(AttentionProblem(batch=b, heads_q=h, seq_q=n,
                                                            head_dim=128), "h100",
                                           "standard").kernels if k.name == "std_fwd_softmax")
        kept = k.totals().bytes_loaded / s
        print(f"  N {n:5d} B {b} H {h:2d}: requested {req / s:.4f}  L2->SM {xbar / s:.4f}"
              f"  none kept {model:.4f} ({model / (xbar / s) - 1:+.2%})"
              f"  schedule {kept:.4f} ({kept / (xbar / s) - 1:+.2%})")
    print("\nthe H200 validation's softmax kernels: the schedule's L2 -> SM bytes against "
          "Nsight Compute's (16-byte path: N a multiple of 8)")
    for rid, n, ratio in sorted(validation_softmax_rows(), key=lambda t: t[1]):
        print(f"  N {n:5d} {'16-byte' if n % 8 == 0 else 'scalar ':7s} {ratio - 1:+.2%}  {rid}")


if __name__ == "__main__":
    main()
