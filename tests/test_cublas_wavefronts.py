"""The L1 data-pipe probe (measurements/h200/cublas_wavefronts/): the committed table is the
script's reading of the committed Nsight Compute counts, and the counts bear out what the
README and docs/validation.md say of them."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from cublas_wavefronts_table import SMS, blocks, num, table   # noqa: E402


def _row(shape: str) -> dict:
    return next(d for words, d in blocks() if " ".join(words) == shape)


def test_the_committed_table_is_the_script_s_output():
    committed = (ROOT / "benchmarks/results/cublas_wavefronts.txt").read_text()
    assert table() == committed.rstrip("\n")


def test_the_pipe_passes_one_wavefront_per_clock_and_the_busy_share_follows():
    # ncu's own busy percentage against the counts: wavefronts over SM-cycles at one per clock
    for _words, d in blocks():
        assert num(d, "l1tex__data_pipe_lsu_wavefronts.avg.peak_sustained") == 1
        share = (num(d, "l1tex__data_pipe_lsu_wavefronts.sum")
                 / (num(d, "sm__cycles_elapsed.avg") * SMS))
        pct = num(d, "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed")
        assert share * 100 == pytest.approx(pct, rel=0.02)


@pytest.mark.parametrize("alone,shared", [("pv 4097 128 4", "pv 4097 128 8"),
                                          ("pv 2049 128 7", "pv 2049 128 15")])
def test_a_cta_sends_the_same_wavefronts_alone_and_two_per_sm(alone, shared):
    a, s = _row(alone), _row(shared)

    def per_cta(d):
        gx, gy, gz = (int(x) for x in d["Grid Size"].strip("()").split(","))
        return num(d, "l1tex__data_pipe_lsu_wavefronts.sum") / (gx * gy * gz)
    assert per_cta(a) == pytest.approx(per_cta(s), rel=0.01)
    # and the pipe is far busier with two per SM
    busy = "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed"
    assert num(s, busy) > 85 > 66.1 > num(a, busy) > 50
