"""The Flash-Decoding kernels (iosim/kernels/cuda/decode.cu) against the float64 NumPy reference,
on the GPU (gpu-marked): ragged KV lengths, contiguous and paged caches (page sizes 16/64/256,
pages shuffled through the block table), GQA 1:1 / 4:1 / 8:1, one and several splits, a shared
prefix, several query tokens with a causal mask.

Outputs are poisoned with NaN before each run (an unwritten element fails). Tolerance: relative
error ‖x − ref‖/‖ref‖ ≤ 2e-3 for fp16 O (the forward kernels' bound in test_kernels_gpu.py;
1e-2 for bf16) and |LSE − ref| ≤ 1e-3 absolute."""
from __future__ import annotations

import numpy as np
import pytest

from iosim.kernels.decode import DecodeLaunch, random_decode_inputs, reference, run_decode

pytestmark = pytest.mark.gpu

O_TOL = {"fp16": 2e-3, "bf16": 1e-2}

# (heads_q, heads_kv, seq_q, lengths, page, splits, causal, d, dtype, extra DecodeLaunch fields)
CASES = [
    (8, 8, 1, (1000, 37, 513), 0, 1, False, 128, "fp16", {}),            # GQA 1:1, no split
    (8, 8, 1, (1000, 37, 513), 0, 4, False, 128, "fp16", {}),            # ragged, 4 splits
    (16, 4, 1, (777, 1500), 0, 7, False, 128, "fp16", {}),               # GQA 4:1
    (32, 4, 1, (2049, 64), 0, 16, False, 128, "fp16", {}),               # GQA 8:1, empty chunks
    (8, 8, 1, (1000, 37, 513), 16, 3, False, 128, "fp16", {}),           # paged 16: 4 pages a tile
    (16, 4, 1, (777, 1500), 64, 5, False, 128, "fp16", {}),              # paged 64
    (32, 4, 1, (2049, 300), 256, 6, False, 128, "fp16", {}),             # paged 256, GQA 8:1
    (32, 4, 1, (2049, 300), 16, 1, False, 128, "fp16", {}),              # paged 16, no split
    (16, 4, 4, (300, 91), 0, 3, True, 128, "fp16", {}),                  # 4 tokens, causal, 16 rows
    (32, 4, 4, (300, 91), 0, 3, True, 128, "fp16", {"block_q": 32}),     # 32 rows in one tile
    (32, 4, 5, (300, 91), 0, 2, True, 128, "fp16", {"block_q": 16}),     # 40 rows: 3 Q tiles
    (8, 1, 3, (500, 130), 64, 2, True, 64, "fp16", {"block_kv": 128}),   # d64, paged
    (16, 4, 1, (777, 1500), 0, 5, False, 128, "bf16", {}),
    (8, 2, 1, (1,), 0, 1, False, 128, "fp16", {}),                       # one key
    (16, 4, 1, (900, 400, 1300), 0, 4, False, 128, "fp16", {"prefix_len": 130}),   # shared prefix
    (16, 4, 1, (1000, 3000), 0, 3, False, 128, "fp16", {"block_kv": 128, "stages": 2}),
    # the default tiling (128 x 2) paged: the block table read one tile ahead, 8 / 2 / 1 pages
    # a tile, ragged (chunks starting mid-request, empty chunks)
    (32, 8, 1, (3000, 1029, 129), 16, 3, False, 128, "fp16", {"block_kv": 128, "stages": 2}),
    (8, 8, 1, (3000, 1029, 129), 64, 2, False, 128, "fp16", {"block_kv": 128, "stages": 2}),
    (32, 4, 1, (3000, 1029, 129), 256, 1, False, 128, "fp16", {"block_kv": 128, "stages": 2}),
]


def _run(case, seed=0, **over):
    import cupy as cp
    from iosim.kernels.decode import device_decode_inputs

    hq, hkv, sq, lens, page, splits, causal, d, dtype, extra = case
    kw = dict(batch=len(lens), heads_q=hq, heads_kv=hkv, seq_q=sq, seqlens=lens, head_dim=d,
              dtype=dtype, causal=causal, splits=splits, page_size=page, **extra)
    kw.update(over)
    launch = DecodeLaunch(**kw)
    host = random_decode_inputs(launch, np.random.default_rng(seed))
    T = device_decode_inputs(host)
    run_decode(launch, T)
    cp.cuda.runtime.deviceSynchronize()
    return launch, host, T


def _id(c):
    return (f"h{c[0]}kv{c[1]}q{c[2]}p{c[4]}s{c[5]}{'c' if c[6] else ''}d{c[7]}{c[8]}"
            + "".join(f"-{k}{v}" for k, v in c[9].items()))


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_decode_output_matches_float64_reference(case):
    from iosim.kernels.reference import from_storage, rel_error
    launch, host, T = _run(case)
    o_ref, lse_ref = reference(host, launch)
    o = from_storage(T["O"].get(), launch.dtype)
    assert rel_error(o, o_ref) <= O_TOL[launch.dtype]
    lse = T["LSE"].get().astype(np.float64)
    assert np.max(np.abs(lse - lse_ref)) <= 1e-3


def test_paged_and_contiguous_caches_give_identical_outputs():
    """The same keys through a shuffled block table (page 16) and stored contiguously."""
    import cupy as cp
    from iosim.kernels.decode import device_decode_inputs

    lens = (700, 129)
    paged = DecodeLaunch(batch=2, heads_q=16, heads_kv=4, seq_q=1, seqlens=lens, splits=3, page_size=16)
    host = random_decode_inputs(paged, np.random.default_rng(1))
    flat = DecodeLaunch(batch=2, heads_q=16, heads_kv=4, seq_q=1, seqlens=lens, splits=3)
    hflat = {"Q": host["Q"], "seqlens": host["seqlens"], "block_table": np.zeros((2, 1), np.int32)}
    for name in ("K", "V"):
        x = np.zeros((2, 4, 700, 128), dtype=host[name].dtype)
        for b, n in enumerate(lens):
            pages = host["block_table"][b, : -(-n // 16)]
            x[b, :, :n] = np.concatenate([host[name][p] for p in pages], axis=1)[:, :n]
        hflat[name] = x
    Tp, Tf = device_decode_inputs(host), device_decode_inputs(hflat)
    run_decode(paged, Tp)
    run_decode(flat, Tf)
    cp.cuda.runtime.deviceSynchronize()
    assert np.array_equal(Tp["O"].get(), Tf["O"].get())


def test_eight_splits_and_the_combine_equal_one_split():
    from iosim.kernels.reference import from_storage, rel_error
    base = (16, 4, 1, (4096, 1000), 0, 1, False, 128, "fp16", {})
    _, _, T1 = _run(base, seed=3)
    _, _, T8 = _run(base, seed=3, splits=8)
    o1, o8 = (from_storage(t["O"].get(), "fp16") for t in (T1, T8))
    assert rel_error(o8, o1) <= 1e-3


def test_trace_of_a_paged_ragged_problem_equals_the_schedule():
    """Trace mode through the Schedule: the kernels' events equal flash-decoding's program."""
    from iosim import AttentionProblem, build_schedule
    from iosim.kernels.run import capture
    from iosim.kernels.trace import compare_trace

    p = AttentionProblem(batch=2, heads_q=8, heads_kv=2, seq_q=1, seq_kv=1000,
                         seq_kv_list=(1000, 200), page_size=16, page_layout="shuffled")
    tiling = dict(block_q=16, block_kv=64, stages=3, warps=4, splits=3)
    tr = capture(p, "flash-decoding", **tiling)
    assert compare_trace(build_schedule(p, "h200", "flash-decoding", **tiling), tr) == []
    assert [k.name for k in tr.kernels] == ["fd_split", "fd_combine"]


def test_prepared_runner_gives_the_same_output_as_run_decode():
    """make_runner (arguments built once, what timing uses) launches the same kernels."""
    import cupy as cp
    from iosim.kernels.decode import device_decode_inputs, make_runner

    launch = DecodeLaunch(batch=2, heads_q=16, heads_kv=4, seq_q=1, seqlens=(900, 2000), splits=5)
    host = random_decode_inputs(launch, np.random.default_rng(4))
    T1, T2 = device_decode_inputs(host), device_decode_inputs(host)
    run_decode(launch, T1)
    run = make_runner(launch, T2)
    T2["O"].fill(0)
    run()
    cp.cuda.runtime.deviceSynchronize()
    assert np.array_equal(T1["O"].get(), T2["O"].get())
