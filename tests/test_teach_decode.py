"""Lesson section 8 (decode) against closed forms."""
import pytest

from iosim import AttentionProblem
from iosim.teach.context import LessonContext
from iosim.teach import decode


@pytest.fixture(scope="module")
def f():
    return decode.facts(LessonContext.make(AttentionProblem(heads_q=32, seq_q=32768), "h100"))


def test_decode_intensity_is_about_the_group_size_in_fp16(f):
    for r in f["rows"]:
        assert r["closed_form_intensity"] == r["group"]           # 2g / 2 bytes
        # Q, O and the fp32 split partials (written and read back) add traffic beyond the KV
        # cache; it matters most at g = 16 (2 KV heads: the smallest cache, the most splits)
        assert r["group"] * 0.85 <= r["intensity"] <= r["group"]


def test_useful_flops_are_4_d_per_pair(f):
    for r in f["rows"]:
        assert r["useful_flops"] == 4 * 128 * 32768 * 32


def test_kv_cache_shrinks_with_the_group(f):
    for r in f["rows"]:
        assert r["kv_bytes"] == 2 * (32 // r["group"]) * 32768 * 128 * 2


def test_ridge_is_tensor_rate_over_dram_bandwidth(f):
    assert f["ridge_flop_per_byte"] == pytest.approx(f["peak_flops_per_s"] / f["dram_bytes_per_s"])
    assert all(r["intensity"] < f["ridge_flop_per_byte"] / 10 for r in f["rows"])
    assert all(r["bound_by"] == "DRAM bandwidth" for r in f["rows"])
