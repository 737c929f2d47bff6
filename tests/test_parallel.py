"""analyze_each: forked workers give the analyses one after another would, byte for byte."""
import json

from iosim import AttentionProblem, load_gpu
from iosim.analysis.analyze import analyze, analyze_each
from iosim.parallel import worker_count

H100 = load_gpu("h100")
P = AttentionProblem(batch=1, heads_q=8, seq_q=2048, head_dim=64, dtype="fp16", causal=True)
ALGOS = ["standard", "fa1", "fa2", "fa3"]


def dumps(results):
    return json.dumps([r.to_dict() for r in results], sort_keys=True)


def test_workers_give_the_serial_results(monkeypatch):
    monkeypatch.setenv("IOSIM_WORKERS", "2")
    done = []
    parallel = analyze_each(P, H100, ALGOS, on_done=done.append)
    assert sorted(done) == sorted(ALGOS)
    assert dumps(parallel) == dumps([analyze(P, H100, a) for a in ALGOS])
    assert [r.algorithm for r in parallel] == ALGOS
    assert all(r.schedule.algorithm == a for r, a in zip(parallel, ALGOS))


def test_one_worker_runs_in_this_process(monkeypatch):
    monkeypatch.setenv("IOSIM_WORKERS", "1")
    assert worker_count(4) == 1
    assert dumps(analyze_each(P, H100, ["fa2"])) == dumps([analyze(P, H100, "fa2")])


def test_worker_count_is_bounded_by_jobs_and_the_cap(monkeypatch):
    monkeypatch.delenv("IOSIM_WORKERS", raising=False)
    assert worker_count(1) == 1
    assert 1 <= worker_count(100) <= 4
