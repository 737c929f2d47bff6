"""Size limits (docs/limits.md): each is refused before any work, in one line naming the limit."""
import pytest

from iosim.algorithms import build_schedule
from iosim.analysis.analyze import analyze
from iosim.errors import IosimError
from iosim.hardware import load_gpu
from iosim.limits import (MAX_EXACT_TILE_OPS, MAX_SEQ, MAX_SIM_CTAS, MAX_TILE_CLASSES,
                          LimitError, check_problem, check_schedule, schedule_size, tensor_bytes)
from iosim.problem import AttentionProblem


def test_seq_one_above_the_limit_is_refused_and_the_limit_itself_accepted():
    assert AttentionProblem(heads_q=1, seq_q=MAX_SEQ).seq_q == 16_777_216
    with pytest.raises(IosimError, match="seq 16,777,217 is above the limit of 16,777,216"):
        AttentionProblem(seq_q=MAX_SEQ + 1)
    with pytest.raises(IosimError, match="seq-kv 16,777,217 is above"):
        AttentionProblem(seq_q=1, seq_kv=MAX_SEQ + 1)


def test_forward_tensor_bytes_are_q_k_v_and_o():
    p = AttentionProblem(batch=2, heads_q=4, heads_kv=2, seq_q=100, seq_kv=300, head_dim=64)
    q = 2 * 4 * 100 * 64 * 2
    kv = 2 * 2 * 2 * 300 * 64 * 2
    assert tensor_bytes(p) == (q + kv + q, "Q, K, V, O")


def test_backward_tensor_bytes_add_one_gradient_per_tensor():
    p = AttentionProblem(batch=1, heads_q=2, seq_q=128, head_dim=64, direction="bwd")
    assert tensor_bytes(p)[0] == 2 * 4 * (2 * 128 * 64 * 2)


def test_a_problem_whose_tensors_exceed_dram_is_refused_with_both_sizes():
    h100 = load_gpu("h100")               # 80 GiB
    p = AttentionProblem(batch=65_535, heads_q=64, seq_q=65_536)
    # 4 tensors × 65,535 × 64 heads × 65,536 × 128 × 2 B = 262,140 GiB
    with pytest.raises(LimitError, match=r"take 262,140.0 GiB but h100 has 80.0 GiB of DRAM"):
        check_problem(p, h100)


def test_a_problem_that_fits_dram_exactly_enough_passes():
    h100 = load_gpu("h100")
    # 4 tensors × 64 heads × 65536 × 128 × 2 B = 8 GiB
    check_problem(AttentionProblem(heads_q=64, seq_q=65536), h100)


def test_schedule_size_counts_classes_and_ctas_of_every_kernel():
    p = AttentionProblem(batch=2, heads_q=4, seq_q=1000, head_dim=64)
    s = build_schedule(p, "h100", "fa2", block_q=128, block_kv=64)
    # ⌈1000/128⌉ = 8 Q blocks per head: 7 full ones run one program, the ragged last (1000 -
    # 7·128 = 104 rows) another; non-causal, so the KV loop is the same for every block.
    assert schedule_size(s) == {"classes": 2, "ctas": 8 * 2 * 4}


def test_too_many_tile_classes_are_refused_naming_the_limit():
    # causal FA-2 with 16-row Q blocks at seq 2^23: each of the 524,288 Q blocks attends a
    # different number of KV blocks, so each is its own class; 524,288 > 262,144
    p = AttentionProblem(heads_q=1, seq_q=2 ** 23, head_dim=32, dtype="fp8", causal=True)
    s = build_schedule(p, "h100", "fa2", block_q=16, block_kv=16)
    with pytest.raises(LimitError, match=f"524,288 distinct CTA programs .* limit of "
                                         f"{MAX_TILE_CLASSES:,}"):
        check_schedule(s, "roofline")


def test_too_many_ctas_are_refused_for_the_simulator_but_not_the_roofline():
    # 16-row Q blocks: 64 per 1024 rows; 64 × 1024 batch × 129 heads = 8,454,144 CTAs
    p = AttentionProblem(batch=1024, heads_q=129, seq_q=1024, head_dim=32, dtype="fp8")
    s = build_schedule(p, "h100", "fa2", block_q=16, block_kv=16)
    check_schedule(s, "roofline")
    with pytest.raises(LimitError, match=f"launches 8,454,144 CTAs, above the simulator's limit "
                                         f"of {MAX_SIM_CTAS:,}"):
        check_schedule(s, "sim", "fast")


def test_batch_and_heads_stop_at_cudas_grid_limit():
    assert AttentionProblem(batch=65_535, heads_q=1, seq_q=1).batch == 65_535
    with pytest.raises(IosimError, match="batch 65,536 is above the limit of 65,535"):
        AttentionProblem(batch=65_536)
    with pytest.raises(IosimError, match="heads 1,000,000,000 is above the limit of 65,535"):
        AttentionProblem(heads_q=10 ** 9)


def test_the_exact_simulator_is_limited_by_tile_operations():
    p = AttentionProblem(batch=64, heads_q=32, seq_q=16384, head_dim=64)
    s = build_schedule(p, "h100", "fa2")
    check_schedule(s, "sim", "fast")
    with pytest.raises(LimitError, match=f"tile operations, above the exact simulator's limit "
                                         f"of {MAX_EXACT_TILE_OPS:,}"):
        check_schedule(s, "sim", "exact")


def test_analyze_refuses_before_building_a_problem_too_large_for_the_gpu():
    with pytest.raises(LimitError, match="DRAM"):
        analyze(AttentionProblem(batch=10_000, seq_q=65536), "h100", "fa2", model="roofline")
