"""The FA-3 Hopper kernel on the CPU: its source compiles for sm_90a with nvcc in every variant
(wgmma in the PTX), its launch arithmetic, and the intra-warpgroup-overlap order that its
traces are compared in. (Its numerics and speed: benchmarks/fa3_vs_torch.py on the H200.)"""
from __future__ import annotations

import shutil
import subprocess

import pytest

from iosim import AttentionProblem, build_schedule
from iosim.kernels import hopper
from iosim.kernels.build import CUDA_DIR
from iosim.kernels.trace import Event, expected_events, overlap_order, schedule_events

NVCC = shutil.which("nvcc")
VARIANTS = {
    "full": {},
    "trace": {"IOSIM_TRACE": 1},
    "d64_three_consumers": {"IOSIM_D": 64, "IOSIM_BQ": 192, "IOSIM_WARPS": 16},
    "bf16": {"IOSIM_BF16": 1},
    "cp_async": {"FA3_TMA": 0},
    "no_warp_specialization": {"FA3_WARP_SPECIALIZED": 0, "IOSIM_WARPS": 8},
    "no_pingpong": {"FA3_PINGPONG": 0},
    "no_intra_overlap": {"FA3_INTRA_OVERLAP": 0},
}


def _ptx(tmp_path, defines: dict) -> str:
    out = tmp_path / "fa3.ptx"
    cmd = [NVCC, "-std=c++17", "-arch=sm_90a", "--ptx", str(CUDA_DIR / hopper.SOURCE), "-o", str(out)]
    cmd += [f"-D{k}={v}" for k, v in defines.items()]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    return out.read_text()


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_fa3_source_compiles_for_sm90a_with_wgmma(variant, tmp_path):
    ptx = _ptx(tmp_path, VARIANTS[variant])
    # d = 128: 8 k-steps of S = QKᵀ and 8 of O += PV (block_kv 128) per call site
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32" in ptx or variant == "d64_three_consumers"
    assert "mbarrier.try_wait.parity" in ptx


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_fa3_copies_are_tma_unless_cp_async_is_asked_for(tmp_path):
    assert "cp.async.bulk.tensor.3d" in _ptx(tmp_path, {})
    ptx = _ptx(tmp_path, {"FA3_TMA": 0})
    assert "cp.async.bulk.tensor" not in ptx and "cp.async.mbarrier.arrive.noinc" in ptx


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_fa3_pingpong_uses_named_barriers_and_its_ablation_none(tmp_path):
    assert "bar.arrive" in _ptx(tmp_path, {})
    assert "bar.arrive" not in _ptx(tmp_path, {"FA3_PINGPONG": 0})


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_fa3_registers_move_to_consumers_only_with_a_producer(tmp_path):
    assert "setmaxnreg.inc.sync.aligned.u32 240" in _ptx(tmp_path, {})
    assert "setmaxnreg" not in _ptx(tmp_path, {"FA3_WARP_SPECIALIZED": 0, "IOSIM_WARPS": 8})


def _problem(**kw):
    base = dict(batch=1, heads_q=2, seq_q=384, head_dim=128, dtype="fp16", causal=False)
    base.update(kw)
    return AttentionProblem(**base)


def test_fa3_threads_are_consumers_plus_producer():
    assert hopper.threads(128, hopper.FULL) == 384
    assert hopper.threads(192, hopper.FULL) == 512
    assert hopper.threads(128, hopper.ABLATIONS["no_warp_specialization"]) == 256


def test_fa3_full_kernel_launches_as_the_schedule_says():
    p = _problem()
    sched = build_schedule(p, "h200", "fa3")
    t = sched.tiling["fwd"]
    d = hopper.defines(p, t, hopper.FULL)
    assert d["IOSIM_WARPS"] * 32 == sched.kernels[0].launch.threads_per_cta == 384
    assert (d["IOSIM_D"], d["IOSIM_BQ"], d["IOSIM_BKV"], d["IOSIM_STAGES"]) == (128, 128, 128, 3)
    assert d["FA3_WARP_SPECIALIZED"] == d["FA3_PINGPONG"] == d["FA3_INTRA_OVERLAP"] == d["FA3_TMA"] == 1


def test_fa3_kernel_refuses_head_dim_it_does_not_build():
    from iosim.errors import IosimError
    p = _problem(head_dim=96)
    with pytest.raises(IosimError, match="head dims 64 and 128"):
        hopper.check_tiling(p, build_schedule(p, "h200", "fa3").tiling["fwd"])


def test_overlap_order_issues_next_qk_before_previous_pv():
    """Three KV blocks: S0 exp0 | S1 PV0 exp1 | S2 PV1 exp2 | PV2 (FA-3's intra-warpgroup order)."""
    k = build_schedule(_problem(), "h200", "fa3").kernels[0]
    comp = [e.name for e in expected_events(k, 0) if e.kind in ("mma", "exp")]
    assert comp == ["S=QK^T", "exp", "S=QK^T", "O+=PV", "exp", "S=QK^T", "O+=PV", "exp", "O+=PV"]


def test_overlap_order_keeps_every_event_and_the_loads_before_their_gemm():
    k = build_schedule(_problem(causal=True), "h200", "fa3").kernels[0]
    for cta in range(k.num_ctas):
        sched, pipelined = schedule_events(k, cta), expected_events(k, cta)
        assert sorted(map(repr, sched)) == sorted(map(repr, pipelined))
        loads = [e.coord for e in pipelined if e.kind == "load" and e.name == "K"]
        firsts = [n for n, e in enumerate(pipelined) if e.kind == "mma" and e.name == "S=QK^T"]
        k_pos = [n for n, e in enumerate(pipelined) if e.kind == "load" and e.name == "K"]
        assert len(loads) == len(firsts) and all(a < b for a, b in zip(k_pos, firsts))


def test_overlap_order_leaves_a_single_gemm_kind_alone():
    ev = [Event("load", "Q", (0,), 2), Event("mma", "G"), Event("mma", "G")]
    assert overlap_order(ev) == ev


# ---- fp8 -----------------------------------------------------------------------------------
@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_fa3_fp8_build_runs_both_gemms_as_e4m3_wgmma(tmp_path):
    ptx = _ptx(tmp_path, {"IOSIM_FP8": 1, "IOSIM_STAGES": 3})
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3") >= 2
    assert "cvt.rn.satfinite.e4m3x2.f32" in ptx


def test_v_permutation_puts_each_threads_accumulator_columns_in_consecutive_k():
    from iosim.kernels.fp8 import v_permutation
    perm = v_permutation(32)
    # thread t of a quad holds columns 2t, 2t+1, 8+2t, 8+2t+1 (+16): they become k = 4t..4t+3
    assert list(perm[:16]) == [0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15]
    assert list(perm[16:]) == [16 + x for x in perm[:16]]


def test_v_permutation_refuses_a_length_vt_rows_cannot_align():
    from iosim.errors import IosimError
    from iosim.kernels.fp8 import v_permutation
    with pytest.raises(IosimError, match="multiple of 16"):
        v_permutation(130)


def test_hadamard_rotation_is_orthogonal_and_spreads_an_outlier():
    import numpy as np
    from iosim.kernels.fp8 import hadamard
    h = hadamard(128)
    assert np.allclose(h @ h.T, np.eye(128), atol=1e-12)
    x = np.zeros(128)
    x[5] = 100.0                      # one outlier feature
    assert np.allclose(np.abs(x @ h), 100.0 / np.sqrt(128))


# ---- on the GPU (gpu-marked: skipped without one; benchmarks/fa3_vs_torch.py ran these checks
# on the H200, benchmarks/results/fa3_h200_run4/check.json) ---------------------------------
GPU_SHAPES = [  # (batch, heads_q, heads_kv, seq_q, seq_kv, d, causal, dtype)
    (1, 1, 1, 128, 128, 128, False, "fp16"),
    (2, 3, 3, 300, 300, 128, True, "fp16"),
    (1, 4, 2, 130, 300, 128, True, "fp16"),
    (1, 2, 1, 300, 130, 128, True, "fp16"),
    (1, 2, 2, 200, 200, 64, True, "fp16"),
    (1, 2, 2, 256, 256, 128, True, "bf16"),
]


def _gpu_problem(shape):
    b, hq, hkv, nq, nkv, d, causal, dtype = shape
    return AttentionProblem(batch=b, heads_q=hq, heads_kv=hkv, seq_q=nq, seq_kv=nkv, head_dim=d,
                            dtype=dtype, causal=causal)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", sorted(hopper.ABLATIONS), ids=str)
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=str)
def test_fa3_kernel_matches_float64_reference(shape, variant):
    import numpy as np
    import cupy as cp
    from iosim.kernels.reference import forward, from_storage, random_inputs, rel_error
    from iosim.kernels.run import Launcher, device_inputs

    p = _gpu_problem(shape)
    host = random_inputs(p, np.random.default_rng(hash((shape, variant)) % 2**32))
    T = device_inputs(host, p.dtype)
    Launcher(build_schedule(p, "h200", "fa3"), fa3_variant=hopper.ABLATIONS[variant]).run(T)
    cp.cuda.runtime.deviceSynchronize()
    ref = {k: from_storage(v, p.dtype) for k, v in host.items()}
    o_ref, lse_ref = forward(ref["Q"], ref["K"], ref["V"], p.causal)
    assert rel_error(from_storage(T["O"].get(), p.dtype), o_ref) <= {"fp16": 2e-3, "bf16": 1e-2}[p.dtype]
    lse = T["LSE"].get().astype(np.float64)
    assert np.array_equal(np.isinf(lse), np.isinf(lse_ref))


@pytest.mark.gpu
def test_fa3_live_trace_equals_schedule():
    from iosim.kernels.run import capture
    from iosim.kernels.trace import compare_trace
    p = _gpu_problem((1, 4, 2, 130, 300, 128, True, "fp16"))
    assert compare_trace(build_schedule(p, "h200", "fa3"), capture(p, "fa3")) == []


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_fa3_releases_k_on_a_barrier_of_its_own_unless_built_joint(tmp_path):
    # FA-3's pipeline_k / pipeline_v: the consumers arrive on K's empty barrier after S = Q Kᵀ
    # (the peeled first iteration and the loop) besides V's after P V
    arrives = lambda ptx: ptx.count("mbarrier.arrive.shared::cta.b64")
    sep = arrives(_ptx(tmp_path, {}))
    joint = arrives(_ptx(tmp_path, {"FA3_SEPARATE_KV_RELEASE": 0}))
    assert sep >= joint + 2
