"""The model's S = Q Kᵀ kernel alone, with the tile and cluster each cuBLAS kernel's name states,
against Nsight Compute's gpu__time_duration of that kernel (measurements/h200/cublas_epilogue_tiles/:
z 16, N 2000 … 8192, K 16 / 64 / 128), with the SM's GEMM epilogue path of the config
(machine.tma_epilogue_cost) and without it. First the figure itself: the K = 16 kernels' bytes
per SM clock (`epilogue_rates`), whose mean over the tiles on the 32-byte sector grid is
GpuSpec.tma_epilogue_bytes_per_clock_per_sm. K = 16 is not simulated (no head dimension of 16);
the points whose shape a validation row has (N 2944 K 64, N 3400 K 64, N 2200 K 128, all at
z 16) are marked and left out of the summary.

    python scripts/cublas_epilogue_tiles_check.py > benchmarks/results/cublas_epilogue_tiles_check.txt
"""
from __future__ import annotations

import csv
import math
import json
import statistics
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from iosim.algorithms import build_schedule
from iosim.algorithms.cublas_tiles import tile_of_kernel_name
from iosim.clock import sustained_simulation
from iosim.hardware import load_gpu
from iosim.problem import AttentionProblem

HERE = Path(__file__).resolve().parents[1] / "measurements/h200/cublas_epilogue_tiles"
VALIDATION_SHAPES = {(2944, 64), (3400, 64), (2200, 128)}
SMS = 132


def ncu_points() -> list:
    """Per probe point, in the probe's order: (kernel name, gpu__time_duration s, SM clock Hz),
    the means of its two launches."""
    per_launch = defaultdict(dict)
    with open(HERE / "cublas_epilogue_tiles_ncu.csv") as f:
        for row in csv.DictReader(line for line in f if line.startswith('"')):
            rec = per_launch[int(row["ID"])]
            rec["name"] = row["Kernel Name"]
            rec[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
    launches = [per_launch[i] for i in sorted(per_launch)]
    return [(launches[i]["name"],
             statistics.mean(x["gpu__time_duration.sum"] for x in launches[i:i + 2]) * 1e-9,
             statistics.mean(x["sm__cycles_elapsed.avg.per_second"] for x in launches[i:i + 2]))
            for i in range(0, len(launches), 2)]


def on_sector_grid(n: int) -> bool:
    return (n * 2) % 32 == 0          # fp16 rows of N elements


def epilogue_rates() -> list:
    """(N, tile, on the sector grid, B/clk/SM) of each K = 16 point: the busiest SM's
    ⌈tiles / SMs⌉ tiles' bytes over its cycles (Nsight Compute's time and clock)."""
    probe = json.loads((HERE / "cublas_epilogue_tiles_h200.json").read_text())
    out = []
    for row, (name, t, clock) in zip(probe["rows"], ncu_points()):
        if row["k"] != 16:
            continue
        n, tile = row["n"], tile_of_kernel_name(name)
        tiles = math.ceil(n / tile.rows) * math.ceil(n / tile.cols) * probe["z"]
        busiest = math.ceil(tiles / SMS) / (tiles / SMS)
        out.append((n, tile, on_sector_grid(n), row["s_bytes"] / SMS * busiest / (t * clock)))
    return out


def epilogue_rate() -> float:
    """The figure: the mean over the K = 16 tiles on the sector grid."""
    return statistics.mean(r for _n, _t, on, r in epilogue_rates() if on)


def without_path(gpu):
    return gpu.model_copy(update={"tma_epilogue_bytes_per_clock_per_sm": None,
                                  "tma_epilogue_serial_fraction": None})


def predict(gpu, n: int, k: int, z: int, tile: str) -> float:
    p = AttentionProblem(batch=1, heads_q=z, heads_kv=z, seq_q=n, seq_kv=n, head_dim=k)
    s = build_schedule(p, gpu, "standard", gemm_tiles=f"std_fwd_qk={tile}")
    r, _at = sustained_simulation(replace(s, kernels=s.kernels[:1]), gpu,
                                  l2_protocol="ncu", time_protocol="warm")
    return r.time_s


def main() -> None:
    print("K = 16: the SM's epilogue rate (busiest SM's bytes over its cycles)")
    for n, tile, on, rate in epilogue_rates():
        print(f"{n:5d}  {tile.text():22s} {'on' if on else 'off':>4s} {rate:6.2f} B/clk/SM")
    print(f"mean over the tiles on the sector grid: {epilogue_rate():.2f} B/clk/SM\n")
    probe = json.loads((HERE / "cublas_epilogue_tiles_h200.json").read_text())
    z = probe["z"]
    path = load_gpu("h200-calibrated")
    base = without_path(path)
    print(f"the model's S kernel (h200-calibrated: {path.tma_epilogue_bytes_per_clock_per_sm} "
          f"B/clk/SM, serial fraction {path.tma_epilogue_serial_fraction}), model / ncu - 1")
    print("N     K  tile (cuBLAS's)         sector  ncu us  S TB/s   no path   path")
    errs = {"no path": ([], []), "path": ([], [])}
    for row, (name, t, _clock) in zip(probe["rows"], ncu_points()):
        n, k = row["n"], row["k"]
        if k < 32:
            continue
        tile = tile_of_kernel_name(name)
        e0 = predict(base, n, k, z, tile.text()) / t - 1
        e1 = predict(path, n, k, z, tile.text()) / t - 1
        mark = "  (validation shape)" if (n, k) in VALIDATION_SHAPES else ""
        if not mark:
            for label, e in (("no path", e0), ("path", e1)):
                errs[label][0 if on_sector_grid(n) else 1].append(e)
        print(f"{n:5d} {k:4d}  {tile.text():22s} {'on' if on_sector_grid(n) else 'off':>5s} "
              f"{t * 1e6:8.1f} {row['s_bytes'] / t / 1e12:6.2f}  {e0:+7.1%} {e1:+7.1%}{mark}",
              flush=True)
    for label, (on, off) in errs.items():
        for part, e in (("on the sector grid", on), ("off it", off)):
            print(f"{label}, {part}: {len(e)} points, mean {statistics.mean(e):+.1%}, mean |err| "
                  f"{statistics.mean(abs(x) for x in e):.1%}, max |err| {max(abs(x) for x in e):.1%}")


if __name__ == "__main__":
    main()
