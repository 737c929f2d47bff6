"""The simulator behaves like the hardware it models (no GPU needed): each test changes one
figure of the GPU or the problem and checks the predicted time or traffic moves as physics
says it must."""
import pytest

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.sim import simulate

H100 = load_gpu("h100")


def run(problem, gpu, algorithm, mode="fast", **tiles):
    return simulate(build_schedule(problem, gpu, algorithm, **tiles), gpu, mode)


def scaled_tensor_rates(gpu, factor):
    scaled = {}
    for key in ("tensor_flops_per_s", "tensor_flops_per_s_achievable"):
        rates = getattr(gpu, key)
        if rates is not None:
            scaled[key] = {k: (v * factor if v else v) for k, v in rates.model_dump().items()}
    return gpu.with_(**scaled)


def test_doubling_dram_bandwidth_halves_a_dram_bound_softmax():
    # standard attention's softmax reads S and writes P (256 MB each here), far beyond L2;
    # L2 bandwidth is raised so that DRAM is the only roof in sight: from half the H100's DRAM
    # bandwidth to all of it (at twice the H100's, the kernel's instruction issue would bind:
    # algorithms/softmax_code.py)
    gpu = H100.with_(l2_bandwidth_bytes_per_s=1e15)
    problem = AttentionProblem(seq_q=4096, heads_q=8)
    slow = run(problem, gpu.with_(dram_bandwidth_bytes_per_s=0.5 * gpu.dram_bandwidth_bytes_per_s),
               "standard").kernels[1]
    fast = run(problem, gpu, "standard").kernels[1]
    assert slow.name == "std_fwd_softmax" and slow.bound_by == fast.bound_by == "dram"
    assert fast.time_s / slow.time_s == pytest.approx(0.5, rel=0.04)


def test_compute_bound_fa2_time_follows_the_tensor_core_rate(monkeypatch):
    # every other roof far away (shared-memory operand reads, elementwise issue slots too):
    # the GEMMs bind
    import iosim.machine
    monkeypatch.setattr(iosim.machine, "ELEMENTWISE_BLOCKS_MMA", False)
    gpu = H100.with_(l2_bandwidth_bytes_per_s=1e15, exp_per_clock_per_sm=1024,
                     fp32_flops_per_s=1e16, shared_memory_bandwidth_bytes_per_clock_per_sm=1e6)
    problem = AttentionProblem(seq_q=8192)
    full = run(problem, gpu, "fa2")
    half = run(problem, scaled_tensor_rates(gpu, 0.5), "fa2")
    assert full.bound_by == "tensor"
    assert half.time_s / full.time_s == pytest.approx(2.0, rel=0.03)


def test_fa2_forward_l2_hit_rate_is_near_complete_at_moderate_n():
    problem = AttentionProblem(seq_q=4096)
    r = run(problem, H100, "fa2", mode="exact")
    compulsory_reads = problem.q_bytes() + problem.kv_bytes()
    assert r.l2_hit_rate >= 0.95
    # Q, K, V each read from DRAM about once: the 50 MiB L2 holds far fewer than the 100 MB,
    # so the heads' CTAs must stay near lockstep; CTAs that drift apart re-read a few tiles
    # (2.3%: the O stores past the dirty limit wait for room in the DRAM write queue,
    # machine.dram_write_queue_s, and hold their CTAs unevenly, and re-reads from half the
    # L2's capacity on miss a few percent of the time, the H100 probe's residency curve)
    assert r.dram_read_bytes == pytest.approx(compulsory_reads, rel=0.03)
    assert r.dram_read_bytes >= compulsory_reads


def test_fa2_forward_l2_hit_rate_falls_when_heads_in_flight_outgrow_l2():
    # ~8 heads in flight × 2 MB of K/V each = 16 MB; a 4 MB L2 cannot keep them
    problem = AttentionProblem(seq_q=4096)
    full = run(problem, H100, "fa2", mode="exact")
    small_gpu = H100.with_(l2_capacity_bytes=4 << 20)
    small = run(problem, small_gpu, "fa2", mode="exact")
    assert small.l2_hit_rate < full.l2_hit_rate
    assert small.dram_read_bytes > 1.03 * full.dram_read_bytes


def test_fa2_forward_rereads_kv_from_dram_at_long_n():
    # at 256k one head's K/V is 128 MB: every wave of its Q blocks streams it from DRAM again
    problem = AttentionProblem(seq_q=262144)
    r = run(problem, H100, "fa2")
    compulsory_reads = problem.q_bytes() + problem.kv_bytes()
    assert r.dram_read_bytes > 3 * compulsory_reads


def test_fa1_moves_more_bytes_than_fa2_with_the_same_tiles():
    problem = AttentionProblem(seq_q=2048, heads_q=8)
    tiles = dict(block_q=64, block_kv=64, stages=1, warps=4)
    fa1 = run(problem, H100, "fa1", **tiles)
    fa2 = run(problem, H100, "fa2", **tiles)
    assert fa1.l2_to_sm_bytes + fa1.sm_to_l2_bytes > 1.5 * (fa2.l2_to_sm_bytes + fa2.sm_to_l2_bytes)
    assert fa1.time_s > fa2.time_s                       # the O/m/l round trips cost time


def test_standard_attention_traffic_grows_as_n_squared():
    small = run(AttentionProblem(seq_q=4096, heads_q=4), H100, "standard")
    large = run(AttentionProblem(seq_q=8192, heads_q=4), H100, "standard")
    ratio = (large.dram_read_bytes + large.dram_write_bytes) / (small.dram_read_bytes
                                                                + small.dram_write_bytes)
    assert ratio == pytest.approx(4.0, rel=0.05)


def fa3_time(exp_per_clock):
    # FA-3's own kernel (O stored coalesced through shared memory): the project kernel's
    # fragment-layout O store (Store.layout) adds 2.6% of epilogue here, which puts the
    # tensor cores at 69% busy, under the 70% that names a binding resource (with the P pack's
    # issue slots, fa3.PACK_P_INSTRUCTIONS_PER_ELEMENT, FA-3's own kernel is at 69.6% too)
    gpu = H100.with_(l2_bandwidth_bytes_per_s=50e12, exp_per_clock_per_sm=exp_per_clock)
    return run(AttentionProblem(seq_q=4096), gpu, "fa3", kernel="flash-attn")


def test_fa3_time_falls_with_exp_throughput_while_exp_is_on_the_critical_path():
    # the consumers' softmax tiles run at the SFU bound once it is slower than the probe's
    # tile (compute.SoftmaxTileServer.sfu_scale); the GEMMs and the step's fixed costs do not
    # scale, so doubling the exp rate takes the time to 0.5-0.6 of what it was
    slow, mid = fa3_time(2), fa3_time(4)
    assert slow.bound_by == "exp"
    assert 0.5 <= mid.time_s / slow.time_s <= 0.6


def test_fa3_time_ignores_exp_throughput_once_softmax_hides_under_the_gemms():
    base, faster = fa3_time(32), fa3_time(256)
    busiest = max(base.utilization, key=base.utilization.get)
    assert busiest == "tensor" and base.utilization["tensor"] > 0.65
    assert base.bound_by in ("tensor", "latency")
    # within 1%: above the probe's SFU rate the consumers' softmax tiles are latency-bound
    # (compute.SoftmaxTileServer), so a faster SFU changes nothing
    assert faster.time_s == pytest.approx(base.time_s, rel=0.01)
