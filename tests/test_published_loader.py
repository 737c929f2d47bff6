"""The published-figures loader (iosim.analysis.validate.load_published): every direction the
papers report is turned into a time with the papers' FLOP count, bad rows are refused by id, and
the committed FA-2 paper rows (A100 Figure 4, H100 Figure 7) are complete."""
import csv

import pytest

from iosim.analysis.validate import PublishedRow, load_published, summarize_published
from iosim.errors import IosimError
from iosim.paths import VALIDATION_DIR

HEADER = ("id,paper,figure,panel,series,gpu,algorithm,direction,batch,heads_q,seq_q,head_dim,"
          "dtype,causal,tflops_per_s,transcription")


def _csv(tmp_path, *rows):
    p = tmp_path / "pub.csv"
    p.write_text("\n".join((HEADER,) + rows) + "\n")
    return p


def test_forward_plus_backward_row_is_three_and_a_half_forward_flops_over_the_rate(tmp_path):
    p = _csv(tmp_path, "x,P,F,q,FlashAttention-2,a100,fa2,fwd+bwd,4,16,4096,128,fp16,True,189,t")
    (pt,) = load_published(p)
    flops = 3.5 * 4 * 4 * 16 * 4096 ** 2 * 128 / 2       # causal halves 4·B·H·N²·d
    assert pt.flops == pytest.approx(flops, rel=1e-12)
    assert pt.measured_time_s == pytest.approx(flops / 189e12, rel=1e-12)
    assert pt.problem["direction"] == "fwd+bwd" and pt.problem["causal"] is True


def test_backward_row_is_two_and_a_half_forward_flops(tmp_path):
    p = _csv(tmp_path, "x,P,F,q,FlashAttention-2,a100,fa2,bwd,8,32,2048,64,fp16,False,100,t")
    (pt,) = load_published(p)
    flops = 2.5 * 4 * 8 * 32 * 2048 ** 2 * 64
    assert pt.measured_time_s == pytest.approx(flops / 100e12, rel=1e-12)


def test_gpu_override_replaces_the_rows_gpu(tmp_path):
    p = _csv(tmp_path, "x,P,F,q,FlashAttention-2,a100,fa2,fwd,8,32,2048,64,fp16,False,100,t")
    assert load_published(p, gpu="h100")[0].gpu == "h100"


def test_unknown_direction_is_refused_naming_the_row(tmp_path):
    p = _csv(tmp_path, "row7,P,F,q,S,a100,fa2,sideways,8,32,2048,64,fp16,False,100,t")
    with pytest.raises(IosimError, match="row7.*direction"):
        load_published(p)


def test_non_positive_rate_is_refused_naming_the_row(tmp_path):
    p = _csv(tmp_path, "row8,P,F,q,S,a100,fa2,fwd,8,32,2048,64,fp16,False,0,t")
    with pytest.raises(IosimError, match="row8.*positive"):
        load_published(p)


def test_summary_splits_by_gpu_and_direction():
    def r(gpu, direction, err):
        return PublishedRow(id="x", paper="p", figure="f", panel="q", series="S", gpu=gpu,
                            algorithm="fa2", causal=False, head_dim=64, seq_q=512,
                            measured_tflops_per_s=1.0, predicted_tflops_per_s=1.0,
                            measured_time_s=1.0, predicted_time_s=1.0 + err, direction=direction)
    s = summarize_published([r("a100", "fwd+bwd", 0.4), r("a100", "fwd+bwd", 0.2),
                             r("h100", "fwd", -0.1)])["published"]
    assert s["gpu a100"]["mape"] == pytest.approx(0.3)
    assert s["gpu h100"]["max_abs_err"] == pytest.approx(0.1)
    assert s["direction fwd+bwd"]["n"] == 2
    assert s["direction fwd"]["mean_signed_err"] == pytest.approx(-0.1)


# ---- the committed rows of the FA-2 paper -----------------------------------------------
def _fa2paper(gpu):
    rows = list(csv.DictReader((VALIDATION_DIR / "published.csv").open()))
    return [r for r in rows if r["id"].startswith(f"fa2paper-{gpu}-")]


@pytest.mark.parametrize("gpu,figure", [("a100", "Figure 4"), ("h100", "Figure 7")])
def test_fa2_paper_rows_cover_four_panels_and_six_lengths(gpu, figure):
    rows = _fa2paper(gpu)
    cells = {(r["head_dim"], r["causal"], r["seq_q"]) for r in rows}
    assert len(rows) == len(cells) == 24
    assert {c[:2] for c in cells} == {("64", "False"), ("128", "False"), ("64", "True"),
                                      ("128", "True")}
    assert {int(c[2]) for c in cells} == {512, 1024, 2048, 4096, 8192, 16384}
    assert all(r["figure"].startswith(figure) and r["direction"] == "fwd+bwd"
               and r["series"] == "FlashAttention-2" and r["algorithm"] == "fa2" for r in rows)
    assert all("forward + backward" in r["panel"] for r in rows)


@pytest.mark.parametrize("gpu", ["a100", "h100"])
def test_fa2_paper_rates_rise_with_sequence_length_in_every_panel(gpu):
    """Every panel of both figures rises monotonically with N (as the bars do); a transposed
    or mistyped value would break it."""
    by_panel = {}
    for r in _fa2paper(gpu):
        by_panel.setdefault(r["panel"], []).append((int(r["seq_q"]), float(r["tflops_per_s"])))
    assert len(by_panel) == 4
    for pts in by_panel.values():
        rates = [v for _n, v in sorted(pts)]
        assert rates == sorted(rates) and rates[0] < rates[-1]
