"""The shared-sector tables of measurements/h200/tma_gap/ and cublas_rmw/, and the check of
one cuBLAS tile order against the validation rows, all from committed data:

    python scripts/shared_sector_misses.py > benchmarks/results/shared_sector_misses.txt

- gap: per launch gap of the merge-window probe, the MiB stored between a pair's two writes and
  the share of pairs whose halves missed each other (DRAM reads beyond G = 0's over the
  largest gap's: a missed pair reads its sector back twice);
- cublas: cuBLAS's S = Q Kᵀ at N 3000 / 3008 by matrix count: the missed share from the DRAM
  reads beyond the operands' (64 bytes a missed pair);
- order: the validation rows' S kernels with the tiles cuBLAS ran (benchmarks/results/
  cublas_given_tiles.txt), each charged the misses the gap curve gives if column tiles were
  visited outermost (the two writers of a column edge z × row tiles apart), at 185 ps a pair.
"""
from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "measurements/h200"
TC, TR, N_GAP = 168, 128, 3008          # the gap probe's tile and pitch (tma_gap_h200.py)


def ncu_blocks(path: Path) -> dict:
    """{head words: {metric: value}} from a probe's `== <head>` + ncu --csv log."""
    out = {}
    for block in re.split(r"^== ", path.read_text(), flags=re.M)[1:]:
        head, *lines = block.split("\n")
        table = list(csv.reader(io.StringIO("\n".join(x for x in lines if x.startswith('"')))))
        name, value = table[0].index("Metric Name"), table[0].index("Metric Value")
        out[tuple(head.split())] = {r[name]: float(r[value].replace(",", "")) for r in table[1:]}
    return out


def gap_curve() -> list:
    """(gap, MiB stored between the two writes, µs, missed share) of the merge-window probe."""
    m = ncu_blocks(H200 / "tma_gap/tma_gap_ncu.txt")
    us = {r["gap"]: r["us"] for r in json.loads((H200 / "tma_gap/tma_gap_h200.json").read_text())["rows"]}
    gaps = sorted(int(g[0]) for g in m)
    lo, hi = (m[(str(g),)]["dram__bytes_read.sum"] for g in (gaps[0], gaps[-1]))
    return [(g, (2 * g + 1) * TR * TC * 2 / 2**20, us[g],
             (m[(str(g),)]["dram__bytes_read.sum"] - lo) / (hi - lo)) for g in gaps]


def cublas_shares(curve: list) -> list:
    """(N, z, tile name, missed share, the share if column tiles were visited outermost) of
    cuBLAS's S kernels, d 64."""
    m = ncu_blocks(H200 / "cublas_rmw/cublas_rmw_ncu.txt")
    names = {(r["n"], r["z"]): r["kernels"][0]["name"]
             for r in json.loads((H200 / "cublas_rmw/cublas_rmw_h200.json").read_text())["rows"]}
    out = []
    for (n, z), name in sorted(names.items()):
        cols, rows = (int(g) for g in re.search(r"hsh_(\d+)x(\d+)", name).groups())
        shared = shared_sectors(n, z, cols)
        if not shared:
            continue
        extra = m[(str(n), str(z))]["dram__bytes_read.sum"] - 2 * z * n * 64 * 2
        apart_mib = z * -(-n // rows) * rows * cols * 2 / 2**20
        out.append((n, z, name[15:30], extra / (64 * shared),
                    float(np.interp(apart_mib, [c[1] for c in curve], [c[3] for c in curve]))))
    return out


def shared_sectors(n: int, z: int, tile_cols: int) -> int:
    """Sectors two row segments of a [z, n, n] fp16 array write half each: tile edges and row
    ends off the 32-byte grid."""
    pitch, edges = 2 * n, range(2 * tile_cols, 2 * n, 2 * tile_cols)
    count = sum(sum(1 for e in edges if (r * pitch + e) % 32) + (r < n - 1 and (r + 1) * pitch % 32 != 0)
                for r in range(n))
    return count * z


def order_check(curve: list) -> list:
    """The S kernels' time errors with cuBLAS's tiles, before and after the misses that
    column-tiles-outermost would give (uses the iosim package)."""
    import yaml
    from iosim.algorithms import build_schedule, standard
    from iosim.algorithms.cublas_tiles import from_kernel_names, parse
    from iosim.analysis.validate import PROBLEM_KEYS
    from iosim.problem import AttentionProblem
    data = ROOT / "iosim/data/validation"
    mib, share = [c[1] for c in curve], [c[3] for c in curve]
    extra_per_pair_s = 185e-12          # tma_gap README: missed pairs' cost beyond merged ones
    given = {}
    for line in (ROOT / "benchmarks/results/cublas_given_tiles.txt").read_text().splitlines():
        if line.startswith("fwd-"):
            row = line.split()[0]
        elif line.strip().startswith("qk"):     # qk L2 rule/given, time rule/given
            m = re.match(r"\s*qk\s+\S+/\s*\S+\s+\S+/\s*(\S+)%", line)
            given[row] = float(m.group(1)) / 100
    cfgs = {c["id"]: c for f in sorted(data.glob("sweep*.yaml")) for c in yaml.safe_load(f.read_text())["configs"]}
    kernels = {}
    for f in sorted(data.glob("measured_h200*_kernels.csv")):
        for r in csv.DictReader(open(f)):
            kernels.setdefault(r["id"], []).append(r)
    out = []
    for id_, ks in sorted(kernels.items()):
        c, err = cfgs.get(id_), given.get(id_[15:])
        tiles = from_kernel_names([k["kernel"] for k in ks], standard.FORWARD_GEMMS) if c else None
        if not tiles or err is None:
            continue
        p = AttentionProblem(**{k: c[k] for k in PROBLEM_KEYS if k in c})
        qk = build_schedule(p, "h200-calibrated", "standard", gemm_tiles=tiles).kernels[0]
        pairs = qk.totals().partial_sector_writes / 2
        if not pairs:
            continue
        t = parse(tiles)["std_fwd_qk"]
        apart_mib = p.batch * p.heads_q * -(-p.seq_q // t.rows) * t.rows * t.cols * 2 / 2**20
        measured = float(ks[0]["ncu_time_s"])
        after = (measured * (1 + err) + np.interp(apart_mib, mib, share) * pairs * extra_per_pair_s) / measured - 1
        out.append((id_[19:], t.text(), apart_mib, err, after))
    return out


def main() -> None:
    curve = gap_curve()
    print("gap   MiB apart      µs   missed (measurements/h200/tma_gap/)")
    for g, mib, us, f in curve:
        print(f"{g:5d} {mib:9.1f} {us:8.1f} {f:8.3f}")
    print("\nN     z  cuBLAS tile       missed  if column tiles outermost (measurements/h200/cublas_rmw/)")
    for n, z, name, f, f_outer in cublas_shares(curve):
        print(f"{n:5d} {z:3d}  {name:16s} {f:6.2f}  {f_outer:6.2f}")
    print("\nS kernels with cuBLAS's tiles: time err, then with column tiles visited outermost")
    for row, tile, apart, before, after in order_check(curve):
        print(f"  {row:36s} {tile:10s} {apart:6.1f} MiB apart  {before:+6.1%} -> {after:+6.1%}")


if __name__ == "__main__":
    main()
