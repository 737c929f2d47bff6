"""The CUDA kernels against a float64 NumPy reference, on the GPU (gpu-marked).

Random inputs from a seed fixed by each case (tests/seeds.py: a failure replays), outputs
poisoned with NaN before each run (an unwritten element fails), relative error
‖x − ref‖/‖ref‖ ≤ 2e-3 for fp16 forward outputs (1e-2 for bf16, whose mantissa is 8 bits
shorter) and ≤ 1e-2 for gradients (2e-2 bf16)."""
from __future__ import annotations

import numpy as np
import pytest

from iosim import AttentionProblem, build_schedule
from seeds import stable_seed

pytestmark = pytest.mark.gpu

FWD_TOL = {"fp16": 2e-3, "bf16": 1e-2}
BWD_TOL = {"fp16": 1e-2, "bf16": 2e-2}

# (batch, heads_q, heads_kv, seq_q, seq_kv, d, causal, dtype)
FWD_SHAPES = [
    (1, 2, 2, 128, 128, 128, False, "fp16"),
    (2, 3, 3, 200, 200, 64, True, "fp16"),
    (1, 4, 2, 130, 300, 128, False, "fp16"),
    (1, 4, 2, 130, 300, 128, True, "fp16"),
    (1, 2, 1, 300, 130, 64, True, "fp16"),       # seq_q > seq_kv: leading rows see no key
    (2, 2, 2, 1000, 1000, 128, True, "fp16"),
    (1, 2, 2, 777, 513, 64, False, "fp16"),
    (1, 2, 2, 256, 256, 128, True, "bf16"),
    (1, 2, 2, 333, 333, 64, False, "bf16"),
    (1, 1, 1, 17, 17, 128, False, "fp16"),
]
BWD_SHAPES = [
    (1, 2, 2, 128, 128, 128, False, "fp16"),
    (1, 2, 2, 200, 200, 64, True, "fp16"),
    (1, 4, 2, 130, 300, 128, True, "fp16"),
    (1, 4, 2, 130, 300, 64, False, "fp16"),
    (2, 2, 2, 513, 513, 128, True, "fp16"),
    (1, 2, 2, 300, 130, 128, True, "fp16"),
    (1, 2, 2, 256, 256, 128, False, "bf16"),
    (1, 2, 2, 192, 192, 64, True, "bf16"),
]


def _problem(shape, direction="fwd"):
    b, hq, hkv, nq, nkv, d, causal, dtype = shape
    return AttentionProblem(batch=b, heads_q=hq, heads_kv=hkv, seq_q=nq, seq_kv=nkv, head_dim=d,
                            dtype=dtype, causal=causal, direction=direction)


def _run(problem, algorithm, seed, direction="fwd"):
    import cupy as cp
    from iosim.kernels.reference import random_inputs, from_storage
    from iosim.kernels.run import device_inputs, run_schedule, forward_schedule

    rng = np.random.default_rng(seed)
    host = random_inputs(problem, rng, with_grad=direction == "bwd")
    T = device_inputs(host, problem.dtype)
    if direction == "bwd":
        run_schedule(forward_schedule(problem, "fa2"), T)
    run_schedule(build_schedule(problem, "h200", algorithm), T)
    cp.cuda.runtime.deviceSynchronize()
    ref_in = {k: from_storage(v, problem.dtype) for k, v in host.items()}
    out = {k: (from_storage(v.get(), problem.dtype) if v.dtype != np.float32 else v.get().astype(np.float64))
           for k, v in T.items()}
    return ref_in, out


@pytest.mark.parametrize("shape", FWD_SHAPES, ids=str)
@pytest.mark.parametrize("algorithm", ["fa2", "fa1", "standard"])
def test_forward_matches_float64_reference(shape, algorithm):
    from iosim.kernels.reference import forward, rel_error

    problem = _problem(shape)
    if algorithm == "standard" and problem.dtype != "fp16":
        pytest.skip("standard runs cuBLAS through cupy.matmul: fp16 only")
    seed = stable_seed(shape, algorithm)
    ref_in, out = _run(problem, algorithm, seed=seed)
    o_ref, lse_ref = forward(ref_in["Q"], ref_in["K"], ref_in["V"], problem.causal)
    err = rel_error(out["O"], o_ref)
    assert err <= FWD_TOL[problem.dtype], f"O rel error {err:.2e} (seed {seed})"
    if algorithm == "fa2":
        lse = out["LSE"]
        assert np.array_equal(np.isinf(lse), np.isinf(lse_ref))
        fin = np.isfinite(lse_ref)
        assert rel_error(lse[fin], lse_ref[fin]) <= 1e-4


@pytest.mark.parametrize("shape", BWD_SHAPES, ids=str)
def test_fa2_backward_matches_float64_reference(shape):
    from iosim.kernels.reference import backward, rel_error

    problem = _problem(shape, "bwd")
    seed = stable_seed(shape)
    ref_in, out = _run(problem, "fa2", seed=seed, direction="bwd")
    dq, dk, dv = backward(ref_in["Q"], ref_in["K"], ref_in["V"], ref_in["dO"], problem.causal)
    for name, ref in (("dQ", dq), ("dK", dk), ("dV", dv)):
        err = rel_error(out[name], ref)
        assert err <= BWD_TOL[problem.dtype], f"{name} rel error {err:.2e} (seed {seed})"


def test_every_output_element_is_written_after_nan_poisoning():
    """Ragged, causal, GQA: no NaN anywhere in any output tensor."""
    problem = _problem((1, 4, 2, 130, 300, 128, True, "fp16"), "bwd")
    _, out = _run(problem, "fa2", seed=7, direction="bwd")
    for name in ("O", "LSE", "D", "dQ", "dK", "dV"):
        assert not np.isnan(out[name]).any(), name


def test_trace_mode_computes_the_same_output():
    """The traced build computes what the timed build computes."""
    import cupy as cp
    from iosim.kernels.reference import random_inputs
    from iosim.kernels.run import device_inputs, run_schedule

    problem = _problem((1, 2, 2, 200, 200, 64, True, "fp16"))
    host = random_inputs(problem, np.random.default_rng(3))
    sched = build_schedule(problem, "h200", "fa2")
    a = run_schedule(sched, device_inputs(host, "fp16"))[0]["O"].get()
    b, tr = run_schedule(sched, device_inputs(host, "fp16"), trace=True)
    cp.cuda.runtime.deviceSynchronize()
    assert np.array_equal(a, b["O"].get())
    assert tr.kernels[0].name == "fa2_fwd"


@pytest.mark.parametrize("algorithm,direction,shape", [
    ("fa2", "fwd", (1, 2, 2, 200, 200, 64, True, "fp16")),
    ("fa2", "bwd", (1, 4, 2, 130, 300, 128, True, "fp16")),
    ("fa1", "fwd", (1, 2, 2, 256, 256, 128, False, "fp16")),
    ("standard", "fwd", (1, 2, 2, 130, 300, 64, True, "fp16")),
], ids=str)
def test_live_trace_equals_schedule(algorithm, direction, shape):
    from iosim.kernels.run import capture
    from iosim.kernels.trace import compare_trace

    problem = _problem(shape, direction)
    tr = capture(problem, algorithm)
    assert compare_trace(build_schedule(problem, "h200", algorithm), tr) == []
