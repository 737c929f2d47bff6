"""cuBLAS's GEMM tiles given by name (algorithms/cublas_tiles.py): kernel names as Nsight
Compute recorded them, the `gemm_tiles` text, and the standard schedule built with them."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from iosim.algorithms import build_schedule, standard
from iosim.algorithms.cublas_tiles import GemmTile, from_kernel_names, parse, text, tile_of_kernel_name
from iosim.errors import IosimError
from iosim.problem import AttentionProblem

DATA = Path(__file__).resolve().parents[1] / "iosim/data/validation"


def test_nvjet_names_state_columns_then_rows():
    # P·V at d 64 ran a 512-row tile one head-dimension wide (measurements/h200/cublas_tiles/)
    assert tile_of_kernel_name("nvjet_sm90_hsh_64x512_64x2_1x2_h_bz_coopB_NNT") == GemmTile(512, 64, 2)
    assert tile_of_kernel_name("nvjet_sm90_hsh_128x200_64x5_2x1_v_bz_coopA_TNT") == GemmTile(200, 128, 5)
    # the measurement CSVs keep the first 40 characters
    assert tile_of_kernel_name("nvjet_sm90_hsh_128x304_64x3_1x2_h_bz_coo") == GemmTile(304, 128, 3)
    assert tile_of_kernel_name("void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_f16") is None
    assert tile_of_kernel_name("std_softmax") is None


def test_gemm_tiles_text_round_trips_and_refuses_bad_items():
    tiles = {"std_fwd_qk": GemmTile(200, 128, 5), "std_fwd_pv": GemmTile(184, 64, 6)}
    assert parse(text(tiles)) == tiles
    assert parse(" std_fwd_qk = 200x128x5 ") == {"std_fwd_qk": GemmTile(200, 128, 5)}
    for bad in ("std_fwd_qk=200x128", "qk:200x128x5", "std_fwd_qk=201x128x5", "std_fwd_qk=200x128x0"):
        with pytest.raises(IosimError):
            parse(bad)


def test_a_measured_runs_names_give_its_tiles():
    rows = {r["id"]: r for r in csv.DictReader(open(DATA / "measured_h200_oddn.csv"))}
    names = rows["iosim-standard-fwd-N5000-d64-H8-B1-fp16-full"]["kernels"].split(";")
    assert from_kernel_names(names, standard.FORWARD_GEMMS) == \
        "std_fwd_qk=256x152x4;std_fwd_pv=336x64x4"
    # a CUTLASS fallback run (N 3500: pitch off 16 bytes) has no nvjet tile to give
    names = rows["iosim-standard-fwd-N3500-d128-H8-B2-fp16-causal"]["kernels"].split(";")
    assert from_kernel_names(names, standard.FORWARD_GEMMS) is None


def test_the_standard_schedule_runs_the_given_tiles():
    p = AttentionProblem(batch=1, heads_q=8, heads_kv=8, seq_q=5000, seq_kv=5000, head_dim=64)
    s = build_schedule(p, "h200", "standard", gemm_tiles="std_fwd_qk=256x152x4;std_fwd_pv=336x64x4")
    qk, _softmax, pv = s.kernels
    assert qk.launch.grid == (-(-5000 // 256), -(-5000 // 152), 8)
    assert pv.launch.grid == (-(-5000 // 336), 1, 8)
    # the rule's own tile where none is given
    rule = build_schedule(p, "h200", "standard", gemm_tiles="std_fwd_pv=336x64x4")
    assert rule.kernels[0].launch.grid == build_schedule(p, "h200", "standard").kernels[0].launch.grid


def test_given_tiles_are_refused_where_they_cannot_apply():
    p = AttentionProblem(batch=1, heads_q=8, heads_kv=8, seq_q=4096, seq_kv=4096, head_dim=64)
    with pytest.raises(IosimError, match="no GEMM"):
        build_schedule(p, "h200", "standard", gemm_tiles="std_fwd_qkv=256x152x4")
    # other algorithms ignore it (so `compare` can pass it to all); `run` refuses it
    with_, without = (build_schedule(p, "h200", "fa2", **kw).kernels[0]
                      for kw in ({"gemm_tiles": "std_fwd_qk=256x152x4"}, {}))
    assert with_.launch == without.launch and with_.totals() == without.totals()
    with pytest.raises(IosimError, match="does not fit|exceed|shared memory|registers"):
        build_schedule(p, "h200", "standard", gemm_tiles="std_fwd_qk=512x512x8")


def test_run_takes_gemm_tiles_for_standard_attention_and_refuses_it_elsewhere():
    from click.testing import CliRunner
    from iosim.cli import main
    args = ["run", "--gpu", "h200", "--seq", "2200", "--heads", "4", "--format", "json"]
    given = CliRunner().invoke(main, args + ["--algo", "standard", "--gemm-tiles",
                                             "std_fwd_qk=200x128x5;std_fwd_pv=184x64x6"])
    rule = CliRunner().invoke(main, args + ["--algo", "standard"])
    assert given.exit_code == 0 and rule.exit_code == 0
    assert given.output != rule.output
    bad = CliRunner().invoke(main, args + ["--algo", "fa2", "--gemm-tiles", "std_fwd_qk=200x128x5"])
    assert bad.exit_code == 2 and "--gemm-tiles applies to standard attention" in bad.output
    bad = CliRunner().invoke(main, args + ["--algo", "standard", "--gemm-tiles", "qk=1"])
    assert bad.exit_code == 2 and "KERNEL=ROWSxCOLSxSTAGES" in bad.output


def test_the_schedule_says_which_tiles_its_gemms_run_and_where_they_came_from():
    p = AttentionProblem(batch=2, heads_q=12, heads_kv=12, seq_q=3000, seq_kv=3000, head_dim=64)
    rule = [n for n in build_schedule(p, "h200", "standard").notes if "cuBLAS GEMM tiles" in n]
    assert len(rule) == 1 and "std_fwd_qk=256x128x4" in rule[0] and "rule" in rule[0]
    given = [n for n in build_schedule(p, "h200", "standard",
                                       gemm_tiles="std_fwd_qk=304x128x3;std_fwd_pv=304x64x4").notes
             if "cuBLAS GEMM tiles" in n]
    assert given == ["cuBLAS GEMM tiles (rows x cols x stages) std_fwd_qk=304x128x3;"
                     "std_fwd_pv=304x64x4: as given (--gemm-tiles)"]
    # the fallback kernels (pitch off 16 bytes) have their own note instead
    q = AttentionProblem(batch=1, heads_q=4, heads_kv=4, seq_q=3001, seq_kv=3001, head_dim=64)
    assert not any("cuBLAS GEMM tiles" in n for n in build_schedule(q, "h200", "standard").notes)


def test_the_note_says_which_tiles_are_given_and_which_the_users_tiling_set():
    p = AttentionProblem(batch=2, heads_q=12, heads_kv=12, seq_q=3000, seq_kv=3000, head_dim=64)
    note = [n for n in build_schedule(p, "h200", "standard", gemm_tiles="std_fwd_pv=304x64x4").notes
            if "cuBLAS GEMM tiles" in n][0]
    assert "std_fwd_pv=304x64x4" in note and "rule" in note and "for std_fwd_qk; the rest given" in note
    note = [n for n in build_schedule(p, "h200", "standard", block_q=128, block_kv=128).notes
            if "cuBLAS GEMM tiles" in n][0]
    assert "std_fwd_qk=128x128" in note and note.endswith("from the tiling options")
