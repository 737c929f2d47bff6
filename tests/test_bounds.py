import math

import pytest

from iosim.analysis.bounds import (compulsory_bytes, fa1_block_sizes, fa1_theorem2_elements,
                                   io_bounds, saha_ye_elements, saha_ye_regime)
from iosim.problem import AttentionProblem


def test_compulsory_forward_is_qkv_read_and_o_lse_written():
    p = AttentionProblem(batch=2, heads_q=4, heads_kv=2, seq_q=100, seq_kv=300, head_dim=64)
    c = compulsory_bytes(p)
    assert c["read_bytes"] == 2 * (4 * 100 * 64 + 2 * 2 * 300 * 64) * 2
    assert c["write_bytes"] == 2 * 4 * 100 * (64 * 2 + 4)


def test_fa1_block_sizes_follow_the_paper():
    # M = 100,000 elements, d = 64: Bc = ceil(M/4d) = 391, Br = min(391, 64)
    assert fa1_block_sizes(100_000, 64) == (64, 391)


def test_fa1_theorem2_count_approaches_twelve_n2d2_over_m():
    N, d, M = 1 << 20, 128, 1 << 17
    ratio = fa1_theorem2_elements(N, d, M) / (N * N * d * d / M)
    assert ratio == pytest.approx(12, rel=0.01)


def test_saha_ye_regimes_cross_at_d_squared():
    N, d = 4096, 128
    assert saha_ye_elements(N, d, d * d) == pytest.approx(N * N * d / math.sqrt(d * d))
    assert saha_ye_elements(N, d, d * d) == pytest.approx(N * N * d * d / (d * d))
    assert saha_ye_elements(N, d, 4 * d * d) == pytest.approx(N * N * d * d / (4 * d * d))
    assert saha_ye_elements(N, d, d * d // 4) == pytest.approx(N * N * d / math.sqrt(d * d / 4))
    assert saha_ye_regime(d, d * d).startswith("large")
    assert saha_ye_regime(d, d * d - 1).startswith("small")


def test_io_bounds_scale_with_heads_and_never_fall_below_compulsory():
    p1 = AttentionProblem(heads_q=1, seq_q=512, head_dim=64)
    p8 = p1.with_(heads_q=8)
    b1, b8 = io_bounds(p1, 1 << 20), io_bounds(p8, 1 << 20)
    assert b8.saha_ye_bytes == 8 * b1.saha_ye_bytes
    assert b1.lower_bound_bytes == max(b1.compulsory_bytes, b1.saha_ye_bytes)
    assert b1.lower_bound_bytes == b1.compulsory_bytes  # M ≥ Nd here: compulsory dominates
