"""torch flash described by flash-attention's kernels (iosim/algorithms/fa2.py, kernels
"flash-attn" and "torch-flash"): loops that run from the last block to the first
(flash_fwd_kernel.h / flash_bwd_kernel.h), the same bytes as the project's order, the two
`.contiguous()` copies of torch's backward, and a simulator that replays downward loops in
their iteration order."""
from iosim import AttentionProblem, build_schedule
from iosim.algorithms.common import block_kind
from iosim.schedule import Alu, Load, expand, loop
from iosim.sim import simulate
from iosim.sim.characterize import split_segments
from iosim.sim.l2model import AccessSampler

CAUSAL = dict(seq_q=1000, seq_kv=1000, heads_q=2, heads_kv=1, batch=1, causal=True)


def _kernel(schedule, name):
    (k,) = [k for k in schedule.kernels if k.name == name]
    return k


def test_a_reverse_loop_binds_its_values_from_the_last_down():
    (lp,) = loop("j", 2, 5, (Load("K", (0, "j"), 1, 1, 2),), reverse=True)
    assert list(lp.values()) == [4, 3, 2]
    assert lp.lowest == 2
    assert [op.coord for op in expand((lp,))] == [(0, 4), (0, 3), (0, 2)]


def test_an_empty_reverse_loop_vanishes():
    assert loop("j", 3, 3, (Alu("x", 1),), reverse=True) == ()


def test_flash_attentions_forward_visits_kv_blocks_from_the_last_to_the_first():
    p = AttentionProblem(**CAUSAL)
    s = build_schedule(p, "h200", "fa2", kernel="flash-attn", block_q=128, block_kv=64)
    fwd = _kernel(s, "fa2_fwd")
    n_kv = -(-p.seq_kv // 64)
    for cta in range(fwd.num_ctas):
        i, b, h = fwd.cta_coord(cta)
        visited = [op.coord[-1] for op in expand(fwd.program(cta)) if op.kind == "load"
                   and op.tensor == "K"]
        # reference: every KV block the mask does not skip, by the corner test, descending
        expect = [j for j in range(n_kv - 1, -1, -1) if block_kind(p, i, j, 128, 64) != "skip"]
        assert visited == expect


def test_flash_attentions_backward_visits_q_blocks_from_the_last_to_the_first():
    p = AttentionProblem(**{**CAUSAL, "direction": "bwd"})
    s = build_schedule(p, "h200", "fa2", kernel="flash-attn", block_q=64, block_kv=128)
    bwd = _kernel(s, "fa2_bwd")
    n_q = -(-p.seq_q // 64)
    for cta in range(bwd.num_ctas):
        j, b, h = bwd.cta_coord(cta)
        visited = [op.coord[-1] for op in expand(bwd.program(cta)) if op.kind == "load"
                   and op.tensor == "Q"]
        expect = [i for i in range(n_q - 1, -1, -1) if block_kind(p, i, j, 64, 128) != "skip"]
        assert visited == expect


def test_the_loop_direction_leaves_the_bytes_and_work_unchanged():
    p = AttentionProblem(**{**CAUSAL, "direction": "fwd+bwd"})
    a = build_schedule(p, "h200", "fa2", kernel="iosim").totals()
    b = build_schedule(p, "h200", "fa2", kernel="flash-attn").totals()
    assert (a.load_bytes, a.store_bytes, a.mma_flops, a.exp, a.alu) == \
        (b.load_bytes, b.store_bytes, b.mma_flops, b.exp, b.alu)


def test_torch_flash_backward_copies_o_and_do_first():
    p = AttentionProblem(seq_q=1000, heads_q=4, batch=2, head_dim=64, direction="bwd")
    s = build_schedule(p, "h200", "fa2", kernel="torch-flash")
    names = [k.name for k in s.kernels]
    assert names[:2] == ["torch_contiguous_O", "torch_contiguous_dO"]
    assert names[2:] == [k.name for k in build_schedule(p, "h200", "fa2",
                                                         kernel="flash-attn").kernels]
    numel = 2 * 4 * 1000 * 64                # batch × heads × N × d
    for k, t in zip(s.kernels[:2], ("O", "dO")):
        tot = k.totals()
        assert dict(tot.load_bytes) == {t + "_strided": 2 * numel}       # fp16
        assert dict(tot.store_bytes) == {t + "_contiguous": 2 * numel}
        assert k.launch.grid == (-(-numel // 512), 1, 1)      # elementwise_kernel<128, 4>
        assert k.launch.threads_per_cta == 128


def test_torch_flash_copy_classes_count_what_enumeration_counts():
    p = AttentionProblem(seq_q=1000, heads_q=3, batch=1, head_dim=64, direction="bwd")
    (k,) = [k for k in build_schedule(p, "h200", "fa2", kernel="torch-flash").kernels
            if k.name == "torch_contiguous_O"]
    assert k.totals().load_bytes == k.totals_by_enumeration().load_bytes
    assert sum(k.totals().load_bytes.values()) == 2 * 1000 * 3 * 64   # a ragged last chunk


def test_exact_mode_moves_the_same_bytes_whichever_way_the_loop_runs():
    p = AttentionProblem(seq_q=512, heads_q=2, batch=1, causal=True)
    up = simulate(build_schedule(p, "h200", "fa2", kernel="iosim"), "h200", mode="exact")
    down = simulate(build_schedule(p, "h200", "fa2", kernel="flash-attn"), "h200", mode="exact")
    assert up.l2_to_sm_bytes == down.l2_to_sm_bytes
    assert up.time_s > 0 and down.time_s > 0


def _k_keys_in_time_order(ratio):
    p = AttentionProblem(**CAUSAL)
    s = build_schedule(p, "h200", "fa2", kernel="flash-attn", block_q=128, block_kv=64)
    fwd = _kernel(s, "fa2_fwd")
    cta = fwd.num_ctas - 1                     # the last Q block: the longest KV loop
    sampler = AccessSampler(ratio)
    segments = split_segments(fwd.program(cta))
    ends = tuple(1e-6 * (i + 1) for i in range(len(segments)))
    sampler.cta(0, segments, 0.0, ends, 1, 0, None)   # stages 1: no load issued early
    placed = sorted(sampler.out, key=lambda a: a[0])
    return [a[1] for a in placed if a[1][0] == "K"], sampler, fwd.program(cta)


def test_the_l2_replay_places_a_downward_loop_in_iteration_order():
    keys, _s, program = _k_keys_in_time_order(1)
    assert keys == [("K",) + op.coord for op in expand(program)
                    if op.kind == "load" and op.tensor == "K"]


def test_the_l2_replay_samples_a_downward_loop_as_it_samples_keys():
    keys, sampler, program = _k_keys_in_time_order(3)
    every = [("K",) + op.coord for op in expand(program) if op.kind == "load" and op.tensor == "K"]
    assert keys == [k for k in every if sampler.sampled(k)]
    assert 0 < len(keys) < len(every)
