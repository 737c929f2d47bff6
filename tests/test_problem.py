import pytest

from iosim.errors import IosimError
from iosim.problem import AttentionProblem


def brute_force_pairs(seq_q, seq_kv, causal):
    off = seq_kv - seq_q
    return sum(1 for r in range(seq_q) for c in range(seq_kv) if not causal or c <= r + off)


@pytest.mark.parametrize("seq_q,seq_kv", [(1, 1), (7, 7), (100, 100), (5, 9), (9, 5), (130, 300), (300, 130)])
@pytest.mark.parametrize("causal", [False, True])
def test_attended_pairs_match_brute_force_mask(seq_q, seq_kv, causal):
    p = AttentionProblem(seq_q=seq_q, seq_kv=seq_kv, causal=causal)
    assert p.attended_pairs() == brute_force_pairs(seq_q, seq_kv, causal)


def test_defaults_are_mha_self_attention():
    p = AttentionProblem(heads_q=8, seq_q=64)
    assert (p.heads_kv, p.seq_kv, p.group_size) == (8, 64, 1)


def test_useful_forward_flops_are_four_n_squared_d_per_head():
    p = AttentionProblem(batch=2, heads_q=3, seq_q=100, head_dim=64)
    assert p.useful_flops_fwd() == 4 * 100 * 100 * 64 * 6


@pytest.mark.parametrize("kwargs,fragment", [
    ({"seq_q": 0}, "seq must be a positive integer"),
    ({"seq_q": -3}, "seq must be a positive integer"),
    ({"head_dim": 100}, "unsupported head dim 100"),
    ({"heads_q": 32, "heads_kv": 5}, "multiple of kv-heads"),
    ({"dtype": "fp64"}, "unknown dtype"),
    ({"direction": "sideways"}, "unknown direction"),
])
def test_bad_problems_raise_one_line_errors(kwargs, fragment):
    with pytest.raises(IosimError) as e:
        AttentionProblem(**kwargs)
    assert fragment in str(e.value) and "\n" not in str(e.value)
