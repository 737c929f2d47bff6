"""benchmarks/sim_diagnostics.py's exact-memory spies run against the engine as it is: the
loads they count per tensor are the schedule's own Load ops (walked here from the
programs), so a change to ExactMemory's signatures that breaks them fails here."""
from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.schedule import Loop

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def diagnostics():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import sim_diagnostics
        yield sim_diagnostics
    finally:
        sys.path.remove(str(BENCHMARKS))


def _loads(items, times: int, out: Counter) -> None:
    for item in items:
        if isinstance(item, Loop):
            _loads(item.body, times * item.count, out)
        elif item.kind == "load":
            out[item.tensor] += times


def schedule_loads(schedule, kernels=None) -> Counter:
    out: Counter = Counter()
    for kernel in schedule.kernels[:kernels]:
        for rep, count in kernel.classes:
            _loads(kernel.program(rep), count, out)
    return out


def _schedule():
    # the problem sim_diagnostics.py builds for `standard 256` (its _schedule)
    return build_schedule(AttentionProblem(seq_q=256, heads_q=32), load_gpu("h100"),
                          "standard")


def test_l2_queue_counts_every_load_of_the_schedule(diagnostics, capsys):
    assert diagnostics.main(["l2-queue", "standard", "256"]) == 0
    printed = {m[1]: int(m[2]) for m in
               re.finditer(r"^\s+(\w+): (\d+) loads", capsys.readouterr().out, re.M)}
    assert printed == dict(schedule_loads(_schedule()))


def test_dram_queue_counts_every_load_up_to_its_kernel(diagnostics, capsys):
    assert diagnostics.main(["dram-queue", "standard", "256", "--kernel", "1"]) == 0
    out = capsys.readouterr().out
    counted: Counter = Counter()
    for m in re.finditer(r"^\s+(\w+) head \d+: (\d+) (?:misses|hits)", out, re.M):
        counted[m[1]] += int(m[2])
    assert counted == schedule_loads(_schedule(), kernels=2)
    assert re.search(r"^\s+store S head \d+: \d+", out, re.M)


def _backlog_rows(diagnostics, capsys):
    assert diagnostics.main(["dram-backlog", "standard", "2048"]) == 0
    return re.findall(r"^\s+(\w+)\s+exact\s+([\d.]+) us \(DRAM util ([\d.]+)\).*"
                      r"at start\s+([\d.]+) us, at end\s+([\d.]+) us",
                      capsys.readouterr().out, re.M)


def test_dram_backlog_spy_leaves_exact_mode_unchanged(diagnostics, capsys):
    """The logged DRAM server is the engine's own: exact mode prints the times a plain
    simulation gives, and with the H100 config's bounded write queue no kernel ends with more
    DRAM work queued than that queue holds."""
    from iosim.sim import simulate
    gpu = load_gpu("h100")
    rows = _backlog_rows(diagnostics, capsys)
    schedule = build_schedule(AttentionProblem(seq_q=2048, heads_q=32), gpu, "standard")
    plain = simulate(schedule, gpu, "exact")
    assert [r[0] for r in rows] == [k.name for k in plain.kernels]
    for (name, t_us, util, _, end_us), k in zip(rows, plain.kernels):
        assert float(t_us) == pytest.approx(k.time_s * 1e6, abs=0.006)
        assert float(end_us) <= gpu.dram_write_queue_s * 1e6 + 0.01


def test_an_unbounded_write_queue_carries_dram_work_past_a_kernels_end(diagnostics, capsys,
                                                                        monkeypatch):
    """Without the bound (write-backs fire and forget), the DRAM-bound softmax's CTAs finish
    ahead of their own write-backs: its DRAM work exceeds its time and is left queued."""
    import iosim.machine
    monkeypatch.setattr(iosim.machine, "dram_write_queue_s", lambda gpu: None)
    rows = _backlog_rows(diagnostics, capsys)
    over = [r for r in rows if float(r[2]) > 1.0]
    assert over and all(float(r[4]) > load_gpu("h100").dram_write_queue_s * 1e6 for r in over)
