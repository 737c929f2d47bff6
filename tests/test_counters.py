"""The counters `iosim run` prints, for a schedule small enough to count by hand.

FA-2 forward, one head, N = 256, d = 64, fp16, 64×64 tiles, not causal: 4 CTAs (Q blocks);
each loads Q_i (64·64·2 = 8,192 B) once and K_j, V_j (8,192 B each) for 4 KV blocks, and
stores O_i (8,192 B) and LSE_i (64 fp32 = 256 B)."""
from iosim import AttentionProblem, build_schedule
from iosim.analysis.counters import count

TILE = 64 * 64 * 2
C = count(build_schedule(AttentionProblem(heads_q=1, seq_q=256, head_dim=64), "h100", "fa2",
                         block_q=64, block_kv=64, stages=2, warps=4))


def test_tile_traffic_between_l2_and_the_sms():
    assert C.l2_to_smem_bytes == 4 * (TILE + 4 * 2 * TILE)
    assert C.l2_to_smem_bytes_by_tensor == {"K": 16 * TILE, "Q": 4 * TILE, "V": 16 * TILE}
    assert C.smem_to_l2_bytes == 4 * (TILE + 256)
    assert C.smem_to_l2_bytes_by_tensor == {"LSE": 4 * 256, "O": 4 * TILE}
    assert C.l2_bytes == 4 * (9 * TILE) + 4 * (TILE + 256)


def test_dram_estimate_is_each_tensor_once():
    # Q, K, V read once (256·64·2 B each); O and LSE written once
    assert C.dram_read_bytes == 3 * 4 * TILE
    assert C.dram_write_bytes == 4 * TILE + 4 * 256
    assert C.dram_bytes == 3 * 4 * TILE + 4 * TILE + 4 * 256


def test_work_counts():
    assert C.mma_flops == C.useful_flops == 4 * 256 * 256 * 64
    assert C.exp_count == 16 * (64 * 64 + 64)
    # softmax 3 and rescale of O per step, normalization of O once per Q block
    assert C.alu_ops == 16 * (3 * 64 * 64 + 64 * 64) + 4 * 64 * 64


def test_launch_counts():
    assert (C.kernels, C.ctas, C.loads, C.stores) == (1, 4, 4 * 9, 4 * 2)


def test_json_carries_the_totals():
    d = C.to_dict()
    assert d["dram_bytes"] == C.dram_read_bytes + C.dram_write_bytes
    assert d["l2_bytes"] == C.l2_to_smem_bytes + C.smem_to_l2_bytes


def test_dram_estimate_counts_a_tensor_stored_many_times_once():
    # FA-1 forward, same problem, 64×64 tiles: O, l, m are stored at the initialisation and
    # after each of the 4 × 4 block pairs, but the estimate writes each tensor once
    c = count(build_schedule(AttentionProblem(heads_q=1, seq_q=256, head_dim=64), "h100", "fa1",
                             block_q=64, block_kv=64, stages=1, warps=4))
    assert c.smem_to_l2_bytes_by_tensor == {"O": 5 * 4 * TILE, "l": 5 * 4 * 256, "m": 5 * 4 * 256}
    assert c.dram_write_bytes == 4 * TILE + 2 * 4 * 256
    # Q, O, l, m are read at every pair (4 times each), K and V once: each counted once
    assert c.dram_read_bytes == 4 * 4 * TILE + 2 * 4 * 256
