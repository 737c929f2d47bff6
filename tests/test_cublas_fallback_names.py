"""CUTLASS fallback kernels named by the run that measured them (cublas_fallback.
tile_of_kernel_name): their launch as Nsight Compute recorded it, and the schedule built with
them against the kernels that ran."""
from pathlib import Path

import pytest

from iosim import AttentionProblem, build_schedule
from iosim.algorithms import cublas_fallback as fallback
from iosim.algorithms.cublas_tiles import from_kernel_names, parse
from iosim.algorithms.standard import FORWARD_GEMMS
from iosim.errors import IosimError
from iosim.formats import load_kernel_names, load_kernel_rows
from iosim.measure.ncu import raw_rows
from iosim.paths import VALIDATION_DIR

H200 = Path(__file__).resolve().parents[1] / "measurements" / "h200"
NCU_FILES = (H200 / "fallback_holdout" / "ncu_raw_fallback.txt",
             H200 / "cublas_align2" / "cublas_align2_ncu.csv",
             H200 / "cublas_align1" / "cublas_align1_ncu.csv")


def _ncu_launches() -> dict:
    """{CUTLASS kernel: {(threads, registers, dynamic shared bytes)}} over the committed files."""
    out = {}
    for f in NCU_FILES:
        for r in raw_rows(f.read_text()):
            name = r.get("Kernel Name", "")
            if "cutlass_" not in name:
                continue
            key = name[name.index("cutlass_"):].split(">")[0]
            out.setdefault(key, set()).add(
                (int(r["launch__block_size"]), int(r["launch__registers_per_thread"]),
                 int(r["launch__shared_mem_per_block_dynamic"].replace(",", ""))))
    return out


def test_every_measured_launch_is_nsight_computes():
    launches = _ncu_launches()
    assert set(launches) == set(fallback.MEASURED_LAUNCH)
    for name, (threads, registers) in fallback.MEASURED_LAUNCH.items():
        assert {(t, r) for t, r, _ in launches[name]} == {(threads, registers)}, name


def test_the_named_tile_needs_the_shared_memory_the_kernel_asked_for():
    # stages x (rows + cols) x K step x 2 bytes: the orientation, K step and stages read from
    # the name (and the align1 kernels' unstated 32 / 2) give each kernel's measured bytes
    for name, found in _ncu_launches().items():
        t = fallback.tile_of_kernel_name(name)
        (smem,) = {s for _, _, s in found}
        assert t.stages * (t.rows + t.cols) * t.bk * 2 == smem, name


def test_names_read_in_cublas_column_major_view():
    s = fallback.tile_of_kernel_name("cutlass_80_tensorop_f16_s16816gemm_f16_256x128_32x3_tn_align2")
    assert (s.rows, s.cols, s.bk, s.stages, s.warps) == (128, 256, 32, 3, 8)
    assert s.regime is fallback.REGIMES[2, False]          # tn: an N x N output
    o = fallback.tile_of_kernel_name("void cutlass::Kernel2<cutlass_75_tensorop_f16_s1688gemm_f16_64x64_nn_align1>(T1::Params)")
    assert (o.rows, o.cols, o.bk, o.stages, o.warps, o.registers) == (64, 64, 32, 2, 4, 96)
    assert o.regime is fallback.REGIMES[1, True] and o.warp_rows == 32   # 2 x 2 warps
    # the rule's own tiles keep CUTLASS's 64 x 64 warp tile
    assert fallback.tile_of_kernel_name(
        "cutlass_80_tensorop_f16_s16816gemm_f16_128x256_64x3_nn_align2").warp_rows == 64
    assert fallback.tile_of_kernel_name("cutlass_80_tensorop_f16_s16816gemm_f16_32x32_64x9_nn_align2") is None
    assert fallback.tile_of_kernel_name("nvjet_sm90_hsh_128x200_64x5_2x1_v_bz_coopA_TNT") is None


def _fallback_p_v_runs() -> list:
    """(row id, problem, gemm_tiles text, its P V kernel's measured row) of every committed
    standard row whose GEMMs ran CUTLASS fallback kernels."""
    import yaml
    from iosim.analysis.validate import PROBLEM_KEYS
    cfgs = {c["id"]: c for f in sorted(VALIDATION_DIR.glob("sweep*.yaml"))
            for c in yaml.safe_load(f.read_text())["configs"]}
    out = []
    for f in sorted(VALIDATION_DIR.glob("measured_h200*_kernels.csv")):
        for rid, ks in load_kernel_rows(f).items():
            tiles = from_kernel_names([k["kernel"] for k in ks], FORWARD_GEMMS)
            if tiles and "cutlass" in tiles and cfgs[rid]["algorithm"] == "standard":
                problem = AttentionProblem(**{k: cfgs[rid][k] for k in PROBLEM_KEYS if k in cfgs[rid]})
                out.append((rid, problem, tiles, ks[2]))
    return out


def test_every_given_p_v_kernel_launches_the_measured_grid_and_block():
    """CUTLASS's P V grids are not swizzled (x: row tiles, z: matrices), so the grid Nsight
    Compute recorded checks the tile's rows, read second in the name (N 2730's 128x256_64x3_nn
    is 256 rows: 11 tiles, not 22), and the block its threads."""
    runs = _fallback_p_v_runs()
    assert len(runs) >= 9
    ruled_otherwise = 0
    for rid, p, tiles, measured in runs:
        pv = build_schedule(p, "h200-calibrated", "standard", gemm_tiles=tiles).kernels[2]
        grid = tuple(int(v) for v in measured["grid"].strip("()").replace(",", " ").split())
        block = int(measured["block"].strip("()").replace(",", " ").split()[0])
        assert (pv.launch.grid, pv.launch.threads_per_cta) == (grid, block), rid
        rule = build_schedule(p, "h200-calibrated", "standard").kernels[2]
        ruled_otherwise += rule.launch.grid != grid
    assert ruled_otherwise >= 3      # the names change what the rule would have run


def test_a_fallback_kernel_given_where_cublas_runs_nvjet_is_refused():
    p = AttentionProblem(batch=2, heads_q=8, seq_q=2048, seq_kv=2048, head_dim=64)
    with pytest.raises(IosimError, match="only where S's row pitch is off 16 bytes"):
        build_schedule(p, "h200-calibrated", "standard",
                       gemm_tiles="std_fwd_pv=cutlass_80_tensorop_f16_s16816gemm_f16_64x64_64x4_nn_align2")
    with pytest.raises(IosimError, match="no fallback kernel of that name has a measured launch"):
        parse("std_fwd_pv=cutlass_80_tensorop_f16_s16816gemm_f16_32x32_64x9_nn_align2")


def test_the_wrong_kind_of_kernel_for_the_pitch_is_refused_with_the_reason():
    odd = AttentionProblem(batch=2, heads_q=8, seq_q=2050, seq_kv=2050, head_dim=64)
    with pytest.raises(IosimError, match="off 16 bytes: cuBLAS runs a CUTLASS fallback kernel"):
        build_schedule(odd, "h200-calibrated", "standard", gemm_tiles="std_fwd_pv=256x64x4")
    with pytest.raises(IosimError, match="here the tiling options override"):
        build_schedule(odd, "h200-calibrated", "standard", block_q=128,
                       gemm_tiles="std_fwd_pv=cutlass_80_tensorop_f16_s16816gemm_f16_64x64_64x4_nn_align2")
    with pytest.raises(IosimError, match="has no TMA"):
        build_schedule(odd, "a100", "standard",
                       gemm_tiles="std_fwd_pv=cutlass_80_tensorop_f16_s16816gemm_f16_64x64_64x4_nn_align2")
    # a name with anything after it is not that kernel's
    with pytest.raises(IosimError, match="no fallback kernel of that name"):
        parse("std_fwd_pv=cutlass_80_tensorop_f16_s16816gemm_f16_64x64_64x4_nn_align21")


def test_kernel_names_describe_rows_only_on_a_gpu_with_tma():
    from iosim.analysis.validate import gemm_tiling
    names = load_kernel_names(VALIDATION_DIR / "measured_h200_fallback_kernels.csv")
    cfg = {"impl": "iosim", "algorithm": "standard", "direction": "fwd"}
    rid = "iosim-standard-fwd-N2050-d64-H8-B2-fp16-full"
    assert gemm_tiling(cfg, names[rid], "h200-calibrated")
    assert gemm_tiling(cfg, names[rid], "a100") == {}
