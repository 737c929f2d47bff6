"""The standard attention's GEMM tiles against the tiles cuBLAS chose on the H200
(measurements/h200/cublas_tiles/cublas_tiles_h200.json: torch.matmul's kernel names from the
profiler, nvjet_sm90_hsh_<A>x<B>_64x<stages>, A the output's columns and B its rows in
cuBLAS's column-major view). Shapes where cuBLAS ran a tile outside the power-of-two family
the model picks from (8, 24, 48, 80, 192 rows: split-K-like cluster kernels on grids of a
few matrices) are left out; the test fails if they become most of the table."""
import json
import re
from pathlib import Path

import pytest

from iosim import AttentionProblem, load_gpu
from iosim.algorithms import build_schedule

TABLE = json.loads((Path(__file__).resolve().parents[1]
                    / "measurements/h200/cublas_tiles/cublas_tiles_h200.json").read_text())
FAMILY = {64, 128, 256, 512}


def measured_tile(kernels):
    (k,) = [k for k in kernels if k["name"].startswith("nvjet")]
    a, b = map(int, re.match(r"nvjet_sm90_hsh_(\d+)x(\d+)_", k["name"]).groups())
    return a, b


def model_tiles(row):
    p = AttentionProblem(batch=1, heads_q=row["z"], seq_q=row["n"], seq_kv=row["n"],
                         head_dim=row["d"], dtype="fp16")
    s = build_schedule(p, load_gpu("h200"), "standard")
    out = {}
    for k in s.kernels:
        if k.name in ("std_fwd_qk", "std_fwd_pv"):
            gx, gy, _ = k.launch.grid       # (row tiles, column tiles, matrices)
            rows = -(-row["n"] // gx)
            cols = -(-(row["n"] if k.name == "std_fwd_qk" else row["d"]) // gy)
            out[k.name] = (rows, cols)
    return out


ROWS = [r for r in TABLE["rows"]]


def test_most_measured_tiles_are_in_the_family():
    inside = [r for r in ROWS if set(measured_tile(r["pv"])) <= FAMILY]
    assert len(inside) >= 0.6 * len(ROWS)


# cuBLAS also weighs the K loop: at K = N = 512 it kept the 256-row, 5-stage tile on grids
# that the 512-row, 2-stage one fills (z >= 128); the model's rule looks at the grid only.
SHORT_K = pytest.mark.xfail(strict=True, reason="cuBLAS keeps 256 rows at K = 512")


# On grids of few matrices cuBLAS also halves
# the d = 128 output's columns (64x128, 64x64 kernels); the model halves a d-wide output's rows
# only (two CTAs sharing a P panel at once is what the fast mode does not yet follow).
D_SPLIT = pytest.mark.xfail(strict=True, reason="cuBLAS splits d = 128; the model halves rows only")


def pv_case(r):
    cols, _ = measured_tile(r["pv"])
    if r["d"] == 64 and r["n"] == 512 and r["z"] >= 128:
        return pytest.param(r, marks=SHORT_K)
    if cols < r["d"]:
        return pytest.param(r, marks=D_SPLIT)
    return r


@pytest.mark.parametrize("row", [pv_case(r) for r in ROWS if set(measured_tile(r["pv"])) <= FAMILY],
                         ids=lambda r: f"pv-d{r['d']}-n{r['n']}-z{r['z']}")
def test_pv_tile_is_the_one_cublas_ran(row):
    cols, rows = measured_tile(row["pv"])
    assert model_tiles(row)["std_fwd_pv"] == (rows, cols)


@pytest.mark.parametrize("row", [r for r in ROWS if set(measured_tile(r["qk"])) <= FAMILY],
                         ids=lambda r: f"qk-d{r['d']}-n{r['n']}-z{r['z']}")
def test_qk_tile_is_the_one_cublas_ran(row):
    a, b = measured_tile(row["qk"])
    assert sorted(model_tiles(row)["std_fwd_qk"]) == sorted((a, b))
