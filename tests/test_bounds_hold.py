"""The IO lower bound holds for every algorithm on every problem shape: rectangular, causal
(including seq_kv < seq_q), GQA, decode, ragged batches, at every SRAM size."""
import pytest
from hypothesis import assume, given, settings, strategies as st

from iosim import AttentionProblem, IosimError, build_schedule, load_gpu
from iosim.algorithms import ALGORITHMS
from iosim.analysis.bounds import io_bounds, necessary_bytes

H100 = load_gpu("h100")


def gpu_with_sram(smem_bytes: int):
    """H100 with its shared memory per SM (and per CTA) set to smem_bytes."""
    return H100.model_copy(update={"shared_memory_per_sm_bytes": smem_bytes,
                                   "shared_memory_per_block_bytes": smem_bytes})


problems = st.builds(
    lambda b, hkv, g, nq, nkv, d, causal: AttentionProblem(
        batch=b, heads_q=hkv * g, heads_kv=hkv, seq_q=nq, seq_kv=nkv, head_dim=d, causal=causal),
    st.integers(1, 2), st.integers(1, 2), st.sampled_from([1, 4, 8]),
    st.sampled_from([1, 2, 7, 64, 300, 1024, 2048]), st.sampled_from([1, 100, 1024, 4096]),
    st.sampled_from([64, 128]), st.booleans())
srams = st.sampled_from([48 * 1024, 100 * 1024, 160 * 1024, 228 * 1024])


@settings(max_examples=120, deadline=None)
@given(problems, srams, st.sampled_from(ALGORITHMS))
def test_counted_traffic_is_at_least_the_lower_bound(p, sram, algorithm):
    gpu = gpu_with_sram(sram)
    try:
        s = build_schedule(p, gpu, algorithm)
    except IosimError:          # no tiling of this algorithm fits this SRAM
        assume(False)
    t = s.totals()
    bound = io_bounds(p, sram)
    assert t.bytes_loaded + t.bytes_stored >= bound.lower_bound_bytes


@pytest.mark.parametrize("algorithm", ["standard", "fa1", "fa2", "fa3"])
@pytest.mark.parametrize("shape", [dict(seq_q=1, seq_kv=32768), dict(seq_q=1024, seq_kv=32768),
                                   dict(seq_q=4096, seq_kv=1024, causal=True)])
def test_issue_cases_are_at_or_above_the_bound(algorithm, shape):
    # the issue's cases: decode 0.06×, rectangular 0.45×, causal seq_kv < seq_q 0.25× before
    p = AttentionProblem(heads_q=8, **shape)
    t = build_schedule(p, H100, algorithm).totals()
    assert t.bytes_loaded + t.bytes_stored >= io_bounds(p, H100.shared_memory_per_sm_bytes).lower_bound_bytes


def test_decode_floor_is_the_kv_cache_once_plus_q_and_o():
    # 32 query heads on 8 KV heads, 1 token, 65,536 keys, d 128, fp16
    p = AttentionProblem(heads_q=32, heads_kv=8, seq_q=1, seq_kv=65536)
    b = io_bounds(p, 228 * 1024)
    kv = 2 * 8 * 65536 * 128 * 2
    assert b.compulsory_bytes == kv + 2 * 32 * 128 * 2
    assert b.lower_bound_bytes == b.compulsory_bytes
    assert b.regime.startswith("memory floor")


def test_theta_term_counts_attended_pairs_not_n_squared():
    # 1,024 queries × 32,768 keys: pairs = 1024·32768 per head, not 32768²
    p = AttentionProblem(heads_q=1, seq_q=1024, seq_kv=32768, head_dim=64)
    M = 1 << 20
    b = io_bounds(p, 2 * M)
    assert b.attended_pairs == 1024 * 32768
    assert b.n2d2_over_m_bytes == int(1024 * 32768 * 64 * 64 / M * 2)


def test_causal_rows_that_see_no_key_need_no_q_read():
    # causal, 4,096 queries, 1,024 keys, bottom-right: rows 0..3071 attend nothing
    p = AttentionProblem(heads_q=1, seq_q=4096, seq_kv=1024, head_dim=64, causal=True)
    n = necessary_bytes(p)
    assert n["read_bytes"] == (1024 * 64 + 2 * 1024 * 64) * 2
    assert n["write_bytes"] == 4096 * 64 * 2


def test_shared_prefix_is_in_the_floor_once():
    p = AttentionProblem(batch=4, heads_q=8, heads_kv=8, seq_q=1, seq_kv=3000, prefix_len=2000)
    kv = 2 * 8 * (2000 + 4 * 1000) * 128 * 2
    assert necessary_bytes(p)["read_bytes"] == kv + 4 * 8 * 128 * 2


kv_problems = st.builds(
    lambda b, hkv, g, s, lens, pre, page, layout: AttentionProblem(
        batch=b, heads_q=hkv * g, heads_kv=hkv, seq_q=s, seq_kv_list=tuple(lens[:b]),
        prefix_len=min(pre, min(lens[:b])), page_size=page, page_layout=layout),
    st.integers(1, 4), st.integers(1, 2), st.sampled_from([1, 4, 8]), st.integers(1, 4),
    st.lists(st.integers(64, 3000), min_size=4, max_size=4), st.sampled_from([0, 16, 700]),
    st.sampled_from([None, 16, 64]), st.sampled_from(["contiguous", "shuffled", "fragmented"]))


@settings(max_examples=60, deadline=None)
@given(kv_problems, srams, st.sampled_from(["flash-decoding", "flash-decoding-cascade"]))
def test_kv_cache_schedules_are_at_or_above_the_bound(p, sram, algorithm):
    gpu = gpu_with_sram(sram)
    try:
        s = build_schedule(p, gpu, algorithm)
    except IosimError:
        assume(False)
    t = s.totals()
    assert t.bytes_loaded + t.bytes_stored >= io_bounds(p, sram).lower_bound_bytes


@settings(max_examples=60, deadline=None)
@given(problems.map(lambda p: p.with_(direction="fwd+bwd")), srams, st.sampled_from(ALGORITHMS))
def test_training_traffic_is_at_least_the_forward_bound(p, sram, algorithm):
    # bound_ratio of a backward or fwd+bwd run divides by the forward bound: the backward pass
    # re-reads Q, K, V, O and recomputes every attended pair, so it can only add traffic
    try:
        s = build_schedule(p, gpu_with_sram(sram), algorithm)
    except IosimError:          # forward-only schedules, or no tiling fits this SRAM
        assume(False)
    t = s.totals()
    assert t.bytes_loaded + t.bytes_stored >= io_bounds(p, sram).lower_bound_bytes
