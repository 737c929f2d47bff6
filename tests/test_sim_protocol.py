"""The ncu L2 protocol: every kernel starts cold, dirty lines left at a kernel's end uncounted."""
from dataclasses import replace

import pytest

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.errors import IosimError
from iosim.sim import simulate

H100 = load_gpu("h100")


@pytest.mark.parametrize("mode,threshold", [("exact", 0), ("fast", 0)])
def test_ncu_protocol_does_not_count_dirty_lines_left_in_l2(mode, threshold):
    # FA-2 forward, one kernel, everything fits in L2: under the warm protocol the final flush
    # writes O and LSE; under ncu's the kernel's writes stay in L2 and no byte is counted
    problem = AttentionProblem(seq_q=1024, heads_q=8)
    schedule = build_schedule(problem, H100, "fa2")
    warm = simulate(schedule, H100, mode, exact_below_events=threshold)
    ncu = simulate(schedule, H100, mode, exact_below_events=threshold, l2_protocol="ncu")
    lse_bytes = problem.batch * problem.heads_q * problem.seq_q * 4
    assert warm.dram_write_bytes == pytest.approx(problem.o_bytes() + lse_bytes)
    assert ncu.dram_write_bytes == 0 and ncu.dram_write_flush_bytes == 0
    assert ncu.dram_read_bytes == pytest.approx(warm.dram_read_bytes)
    assert ncu.model["l2_protocol"] == "ncu"


@pytest.mark.parametrize("mode,threshold", [("exact", 0), ("fast", 0)])
def test_ncu_protocol_makes_each_kernel_start_with_a_cold_l2(mode, threshold):
    # the same FA-2 forward kernel launched twice: warm, the second launch finds Q, K, V in L2
    # (no DRAM read); under ncu's protocol it reads them from DRAM again
    problem = AttentionProblem(seq_q=1024, heads_q=8)
    one = build_schedule(problem, H100, "fa2")
    twice = replace(one, kernels=one.kernels * 2)
    warm = simulate(twice, H100, mode, exact_below_events=threshold)
    ncu = simulate(twice, H100, mode, exact_below_events=threshold, l2_protocol="ncu")
    inputs = problem.q_bytes() + problem.kv_bytes()
    assert warm.kernels[0].dram_read_bytes == pytest.approx(inputs)
    assert warm.kernels[1].dram_read_bytes == 0
    assert ncu.kernels[1].dram_read_bytes == pytest.approx(inputs)
    assert ncu.dram_write_bytes == 0          # O stays in L2 in both launches: uncounted


@pytest.mark.parametrize("threshold", [0, 10**9])
def test_time_protocol_keeps_warm_time_with_ncu_bytes(threshold):
    schedule = build_schedule(AttentionProblem(seq_q=512, heads_q=4, direction="bwd"), H100, "fa2")
    warm = simulate(schedule, H100, exact_below_events=threshold)
    ncu = simulate(schedule, H100, exact_below_events=threshold, l2_protocol="ncu")
    both = simulate(schedule, H100, exact_below_events=threshold, l2_protocol="ncu",
                    time_protocol="warm")
    assert both.time_s == warm.time_s
    assert both.dram_read_bytes == ncu.dram_read_bytes
    assert both.dram_write_bytes == ncu.dram_write_bytes
    assert [k.dram_read_bytes for k in both.kernels] == [k.dram_read_bytes for k in ncu.kernels]


def test_unknown_l2_protocol_is_a_one_line_error():
    schedule = build_schedule(AttentionProblem(seq_q=256, heads_q=2), H100, "fa2")
    with pytest.raises(IosimError, match="unknown L2 protocol"):
        simulate(schedule, H100, l2_protocol="cold")
