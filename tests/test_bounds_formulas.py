"""The IO bounds of a square (N_q = N_kv), unmasked, multi-head problem pinned to the papers'
formulas, evaluated here. Notation: N sequence length, d head dimension, M on-chip memory in
elements (bytes ÷ element size), per (batch, head); the bounds are reported in bytes over all
batch × heads.

- FA-1 (Dao et al. 2022), Theorem 2: Θ(N²d²/M) HBM accesses, with constant 1 here.
- FA-1 Algorithm 1 with Bc = ⌈M/4d⌉: 2Nd + 3Nd·⌈N/Bc⌉ element accesses.
- Saha & Ye (2024): Θ(min(N²d/√M, N²d²/M)); the small-cache term is the smaller for M < d².
"""
import math

import pytest

from iosim import AttentionProblem, analyze, load_gpu
from iosim.analysis.bounds import io_bounds


def test_n2d2_over_m_in_the_large_cache_regime_by_hand():
    # N = 4096, d = 128, M = 65,536 elements (128 KiB of fp16): N²d²/M = 2²⁴·2¹⁴/2¹⁶ = 2²²
    # elements = 8 MiB per head; 2 × 3 heads
    p = AttentionProblem(batch=2, heads_q=3, seq_q=4096, head_dim=128)
    b = io_bounds(p, 131_072)
    assert b.sram_elements == 65_536
    assert b.n2d2_over_m_bytes == 6 * 8_388_608
    # M ≥ d²: min(N²d/√M = 2²³, N²d²/M = 2²²) = 2²² elements, 2 bytes each
    assert b.saha_ye_bytes == 6 * 8_388_608
    assert b.crossover_sram_elements == 128 * 128


def test_saha_ye_small_cache_term_by_hand():
    # N = 4096, d = 256, M = 16,384 elements (32 KiB of fp16) < d² = 65,536:
    # N²d/√M = 2²⁴·2⁸/2⁷ = 2²⁵ elements, N²d²/M = 2²⁶; the bound is 2²⁵ elements = 64 MiB
    p = AttentionProblem(batch=1, heads_q=1, seq_q=4096, head_dim=256)
    b = io_bounds(p, 32_768)
    assert b.saha_ye_bytes == 67_108_864
    assert b.n2d2_over_m_bytes == 2 * 67_108_864
    assert b.regime.startswith("small-cache")


@pytest.mark.parametrize("dtype,eb", [("fp16", 2), ("bf16", 2), ("fp8", 1)])
@pytest.mark.parametrize("n,d,heads", [(1024, 64, 8), (8192, 128, 16), (3000, 96, 2)])
def test_bounds_follow_the_papers_formulas_with_the_element_size(n, d, heads, dtype, eb):
    gpu = load_gpu("h100")
    sram_bytes = gpu.shared_memory_per_sm_bytes
    p = AttentionProblem(batch=1, heads_q=heads, seq_q=n, head_dim=d, dtype=dtype)
    b = io_bounds(p, sram_bytes)
    M = sram_bytes // eb
    n2d2_elements = n * n * d * d / M
    sy_elements = min(n * n * d / math.sqrt(M), n2d2_elements)
    bc = math.ceil(M / (4 * d))
    assert b.sram_elements == M
    assert b.n2d2_over_m_bytes == pytest.approx(n2d2_elements * eb * heads, abs=1)
    assert b.saha_ye_bytes == pytest.approx(sy_elements * eb * heads, abs=1)
    assert b.fa1_theorem2_bytes == (2 * n * d + 3 * n * d * math.ceil(n / bc)) * eb * heads
    # the floor any exact algorithm must move: Q, K, V read once, O written once (the LSE is
    # an output of training's forward pass only, so the bound leaves it out)
    compulsory = heads * 4 * n * d * eb
    assert b.compulsory_bytes == compulsory
    assert b.lower_bound_bytes == max(compulsory, b.saha_ye_bytes)


def test_analysis_bounds_use_the_shared_memory_of_one_sm():
    # H100: 228 KiB of shared memory per SM (the YAML figure) → M = 116,736 fp16 elements
    p = AttentionProblem(batch=1, heads_q=2, seq_q=2048, head_dim=128)
    a = analyze(p, "h100", "fa2", model="roofline")
    M = 233_472 // 2
    assert a.bounds.sram_elements == M
    assert a.bounds.n2d2_over_m_bytes == pytest.approx(2048 ** 2 * 128 ** 2 / M * 2 * 2, abs=1)


def test_compulsory_traffic_of_each_direction_by_hand():
    # B = 2, H = 3, N = 100, d = 64, fp16: one (N × d) tensor of all heads is 2·3·100·64·2 B
    # = 76,800 B; one fp32 row statistic (LSE) is 2·3·100·4 = 2,400 B
    from iosim.analysis.bounds import compulsory_bytes
    p = AttentionProblem(batch=2, heads_q=3, seq_q=100, head_dim=64)
    t, row = 76_800, 2_400
    fwd = {"read_bytes": 3 * t, "write_bytes": t + row, "total_bytes": 4 * t + row}
    # backward reads Q, K, V, O, dO and LSE, writes dQ, dK, dV
    bwd = {"read_bytes": 5 * t + row, "write_bytes": 3 * t, "total_bytes": 8 * t + row}
    assert compulsory_bytes(p) == fwd
    assert compulsory_bytes(p.with_(direction="bwd")) == bwd
    assert compulsory_bytes(p.with_(direction="fwd+bwd")) == \
        {k: fwd[k] + bwd[k] for k in fwd}
