"""cuBLAS's GEMM tiles given by name (algorithms/cublas_tiles.py): kernel names as Nsight
Compute recorded them, the `gemm_tiles` text, and the standard schedule built with them."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from iosim.algorithms import build_schedule, standard
from iosim.algorithms.cublas_tiles import GemmTile, from_kernel_names, parse, text, tile_of_kernel_name
from iosim.errors import IosimError
from iosim.formats import load_kernel_rows
from iosim.problem import AttentionProblem
from iosim.schedule import Load, Loop, program_totals

DATA = Path(__file__).resolve().parents[1] / "iosim/data/validation"


def test_nvjet_names_state_columns_then_rows():
    # P·V at d 64 ran a 512-row tile one head-dimension wide (measurements/h200/cublas_tiles/);
    # the cluster's extents follow the tile's: along the columns, then along the rows
    assert tile_of_kernel_name("nvjet_sm90_hsh_64x512_64x2_1x2_h_bz_coopB_NNT") == \
        GemmTile(512, 64, 2, cluster_rows=2, cluster_cols=1)
    assert tile_of_kernel_name("nvjet_sm90_hsh_128x200_64x5_2x1_v_bz_coopA_TNT") == \
        GemmTile(200, 128, 5, cluster_rows=1, cluster_cols=2)
    # the measurement CSVs keep the first 40 characters
    assert tile_of_kernel_name("nvjet_sm90_hsh_128x304_64x3_1x2_h_bz_coo") == GemmTile(304, 128, 3, 2, 1)
    assert tile_of_kernel_name("nvjet_sm90_hsh_128x304_64x3") == GemmTile(304, 128, 3)
    assert tile_of_kernel_name("void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_f16") is None
    assert tile_of_kernel_name("std_softmax") is None


def test_gemm_tiles_text_round_trips_and_refuses_bad_items():
    tiles = {"std_fwd_qk": GemmTile(200, 128, 5), "std_fwd_pv": GemmTile(184, 64, 6, 1, 2)}
    assert text(tiles) == "std_fwd_qk=200x128x5;std_fwd_pv=184x64x6/1x2"
    assert parse(text(tiles)) == tiles
    assert parse(" std_fwd_qk = 200x128x5 ") == {"std_fwd_qk": GemmTile(200, 128, 5)}
    assert parse("std_fwd_qk=200x128x5 / 4x2") == {"std_fwd_qk": GemmTile(200, 128, 5, 4, 2)}
    for bad in ("std_fwd_qk=200x128", "qk:200x128x5", "std_fwd_qk=201x128x5", "std_fwd_qk=200x128x0",
                "std_fwd_qk=200x128x5/0x2", "std_fwd_qk=200x128x5/8x4", "std_fwd_qk=200x128x5/2"):
        with pytest.raises(IosimError):
            parse(bad)


def test_a_measured_runs_names_give_its_tiles():
    rows = {r["id"]: r for r in csv.DictReader(open(DATA / "measured_h200_oddn.csv"))}
    names = rows["iosim-standard-fwd-N5000-d64-H8-B1-fp16-full"]["kernels"].split(";")
    assert from_kernel_names(names, standard.FORWARD_GEMMS) == \
        "std_fwd_qk=256x152x4/2x1;std_fwd_pv=336x64x4/2x1"
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


def _nvjet_kernels():
    """(problem, GEMM kernel index in the forward schedule, gemm_tiles text, Nsight Compute
    L2→SM bytes) of every nvjet GEMM in the committed H200 measurements."""
    import yaml
    cfgs = {}
    for f in sorted(DATA.glob("sweep*.yaml")):
        for c in yaml.safe_load(f.read_text())["configs"]:
            cfgs[c["id"]] = c
    by_row = {}
    for f in sorted(DATA.glob("measured_h200*_kernels.csv")):
        by_row.update(load_kernel_rows(f))
    from iosim.analysis.validate import PROBLEM_KEYS
    out = []
    for id_, ks in sorted(by_row.items()):
        c = cfgs.get(id_)
        if c is None or c["algorithm"] != "standard" or c.get("direction", "fwd") != "fwd":
            continue
        tiles = from_kernel_names([k["kernel"] for k in ks], standard.FORWARD_GEMMS)
        if tiles and "cutlass" not in tiles:        # nvjet kernels (the fallback's: elsewhere)
            problem = AttentionProblem(**{k: c[k] for k in PROBLEM_KEYS if k in c})
            out += [(id_, problem, i, tiles, float(ks[i]["l2_to_sm_read_bytes"])) for i in (0, 2)]
    return out


def test_given_tiles_and_clusters_give_every_nvjet_kernels_l2_to_sm_bytes():
    """With the tiles and clusters the kernel names state, each cuBLAS sm90 GEMM's L2→SM bytes
    come within 0.5% of Nsight Compute's (the padded grid of a cluster, its boxes past the edge
    and its multicast slices counted; without the clusters the S kernels under 2x4 / 4x1
    clusters were 15–17% short and P·V at N 2200 8%)."""
    rows = _nvjet_kernels()
    assert len(rows) >= 40
    for id_, problem, i, tiles, measured in rows:
        kernel = build_schedule(problem, "h200-calibrated", "standard", gemm_tiles=tiles).kernels[i]
        assert kernel.totals().bytes_loaded == pytest.approx(measured, rel=5e-3), (id_, i, tiles)


def test_a_cluster_pads_the_grid_with_tiles_past_the_edge():
    # N 2944, 128 x 176 tiles in clusters of 4 along the columns: 17 column tiles run as 20
    p = AttentionProblem(batch=1, heads_q=2, heads_kv=2, seq_q=2944, seq_kv=2944, head_dim=64)
    plain, padded = (build_schedule(p, "h200", "standard", gemm_tiles=f"std_fwd_qk=128x176x5{c}").kernels[0]
                     for c in ("", "/1x4"))
    assert plain.launch.grid == (23, 17, 2) and padded.launch.grid == (23, 20, 2)
    # the padded tiles store nothing and read Q's rows in full and K's box past the edge
    eb, box_q, box_k = 2, 128 * 64 * 2, 176 * 64 * 2
    assert padded.totals().bytes_stored == plain.totals().bytes_stored
    extra = padded.totals().bytes_loaded - plain.totals().bytes_loaded
    assert extra == 23 * 3 * 2 * (box_q + box_k)
    assert padded.totals().load_bytes["Q"] - plain.totals().load_bytes["Q"] == 23 * 3 * 2 * box_q
    assert padded.totals().load_bytes["K"] == plain.totals().load_bytes["K"] == 2 * 2944 * 64 * eb * 23
    # every CTA runs its class representative's program (shape and bytes)
    from iosim.sim.characterize import shape_key
    for cta in range(0, padded.launch.grid[0] * padded.launch.grid[1] * 2, 7):
        rep = padded.classes[padded.class_of(cta)][0]
        assert shape_key(padded.program(cta)) == shape_key(padded.program(rep)), cta


def test_a_multicast_box_is_counted_at_each_cta_and_carried_once():
    # P·V at N 2200 d 128, two CTAs along the columns share each P box: P's rows (pitch
    # 4400 B, every other one 16 bytes into a sector) cross as two 64-byte halves each
    p = AttentionProblem(batch=1, heads_q=1, heads_kv=1, seq_q=2200, seq_kv=2200, head_dim=128)
    one, two = (build_schedule(p, "h200", "standard", gemm_tiles=f"std_fwd_pv=184x64x6{c}").kernels[2]
                for c in ("", "/1x2"))
    p_loads = [ld for ld, _ in _counted_loads(two.program(0)) if ld.tensor == "P"]
    assert p_loads and all(ld.multicast == 2 for ld in p_loads)
    full = 184 // 2 * (4 + 5) * 32            # 128-byte rows at offsets 0 and 16: 4 and 5 sectors
    halves = 184 // 2 * (2 + 2 + 3 + 3) * 32  # their 64-byte halves: 2 + 2 and 3 + 3
    first = p_loads[0]
    assert first.bytes + first.oob_bytes == halves and full < halves
    assert first.port_bytes == halves / 2
    # the kernel's totals: half of every multicast box's bytes rides on its partner's read
    shared = sum(times * (ld.bytes + ld.oob_bytes) / 2
                 for cta in range(24) for ld, times in _counted_loads(two.program(cta))
                 if ld.multicast == 2)
    assert two.launch.grid == (12, 2, 1) and shared > 0
    assert two.totals().multicast_bytes == pytest.approx(shared)
    assert one.totals().multicast_bytes == 0


def test_exact_memory_holds_the_l2_port_for_a_multicast_copys_share():
    from iosim.sim.memory import ExactMemory, Server, TileLru
    mems = [ExactMemory(TileLru(10_000), Server(100.0), Server(1e9), 0.0, 0.0) for _ in range(2)]
    ready = [m.load(("P", 0), "P", 500, 0.0, 100, multicast=k) for m, k in zip(mems, (1, 2))]
    assert ready[0] == pytest.approx(6.0) and ready[1] == pytest.approx(3.0)   # 600 or 300 bytes
    # Nsight Compute's count is the same: the bytes reach this CTA either way
    assert mems[0].counters.l2_to_sm_bytes == mems[1].counters.l2_to_sm_bytes == 600
    # a box wholly past the tensor's edge holds the port, not a line or DRAM
    m = mems[0]
    before = m.counters.dram_read_bytes
    m.load(("K", 99), "K", 0, 10.0, 200)
    assert m.counters.dram_read_bytes == before and ("K", 99) not in m.l2.lines


def _counted_loads(program, times=1):
    """(Load, how many times it runs) for every load of a program, loops expanded by count."""
    for item in program:
        if isinstance(item, Loop):
            yield from _counted_loads(item.body, times * item.count)
        elif isinstance(item, Load):
            yield item, times


def test_the_fast_mode_charges_the_l2_port_a_multicast_box_once():
    from iosim.sim.fast import segment_bytes
    p = AttentionProblem(batch=1, heads_q=1, heads_kv=1, seq_q=2200, seq_kv=2200, head_dim=128)
    for cluster in ("", "/1x2"):
        pv = build_schedule(p, "h200", "standard", gemm_tiles=f"std_fwd_pv=184x64x6{cluster}").kernels[2]
        program = pv.program(0)
        l2 = sum(segment_bytes(program, {}, 1.0)[0])
        t = program_totals(program)
        assert l2 == pytest.approx(t.bytes_loaded - t.multicast_bytes + t.bytes_stored)
        if cluster:     # half of every P box rides on the partner CTA's read
            p_box = sum(times * (ld.bytes + ld.oob_bytes) for ld, times in _counted_loads(program)
                        if ld.tensor == "P")
            assert t.multicast_bytes == pytest.approx(p_box / 2)
        else:
            assert t.multicast_bytes == 0


def test_a_cluster_is_refused_on_a_gpu_without_clusters():
    p = AttentionProblem(batch=1, heads_q=2, heads_kv=2, seq_q=2944, seq_kv=2944, head_dim=64)
    with pytest.raises(IosimError, match="thread-block cluster"):
        build_schedule(p, "a100", "standard", gemm_tiles="std_fwd_qk=128x128x3/1x2")
    assert build_schedule(p, "a100", "standard", gemm_tiles="std_fwd_qk=128x128x3").kernels
