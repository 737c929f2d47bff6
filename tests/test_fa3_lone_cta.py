"""A lone CTA of the project's FA-3 kernel against its untraced %globaltimer stamps (first
entry to the last consumer's last store, measurements/h200/o_store/cta_phases_h200*.json):
the setup, the per-consumer wgmma streams and the kernel's own O-store figure together.
Caveat (measurements/h200/q_latency/README.md): those runs launched one input set twelve
times, so the lone head's Q, K and V were L2-resident (its Q lands 512 ns after the copy is
issued), while the model starts from a cold L2 (its Q waits ~650 ns): the model's lone CTA
carries ~150-200 ns of DRAM latency the stamped one did not."""
import importlib.util
import json
from pathlib import Path

import pytest

from iosim import AttentionProblem, load_gpu
from iosim.algorithms import build_schedule, fa3
from iosim.clock import sustained_simulation

RUNS = sorted((Path(__file__).resolve().parents[1] / "measurements/h200/o_store").glob("cta_phases_h200*.json"))


@pytest.mark.parametrize("d, nkv", [(128, 512), (128, 128), (64, 512)])
def test_a_lone_cta_spans_what_the_stamps_measured(d, nkv):
    spans = [json.loads(p.read_text())[f"fa3-d{d}-B1-H1-Nkv{nkv}"]["span_ns"] * 1e-9 for p in RUNS]
    assert len(spans) == 3
    gpu = load_gpu("h200-calibrated")
    p = AttentionProblem(batch=1, heads_q=1, seq_q=512, seq_kv=nkv, head_dim=d, dtype="fp16")
    r, _ = sustained_simulation(build_schedule(p, gpu, "fa3"), gpu, l2_protocol="ncu", time_protocol="warm")
    # the simulated kernel also holds the last slot for the turnover, which the stamps do not see
    assert r.kernels[0].time_s == pytest.approx(sum(spans) / len(spans), rel=0.10)


def test_the_o_store_figure_is_the_stamps_reading():
    path = Path(__file__).resolve().parents[1] / "scripts/fa3_o_store_from_stamps.py"
    spec = importlib.util.spec_from_file_location("o_store", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert fa3.O_STORE_ISSUE_CYCLES_PER_BYTE["iosim"] == mod.figure()
