"""CTA classes are the schedule's: every generator says which CTAs are alike
(Kernel.classes, class_of, class_period), and the simulator costs a class once. These tests
check that statement against every CTA's program on small problems."""
from collections import Counter

import pytest

from iosim import AttentionProblem, build_schedule
from iosim.schedule import Kernel, Launch, classes_along_x, classes_by_edges
from iosim.sim.characterize import shape_key

PROBLEMS = [
    ("fa2", dict(seq_q=1000, heads_q=2, batch=2, direction="fwd+bwd")),
    ("fa2", dict(seq_q=700, seq_kv=900, heads_q=4, heads_kv=2, causal=True, direction="fwd+bwd")),
    ("fa1", dict(seq_q=600, heads_q=2, heads_kv=1, causal=True, direction="fwd+bwd")),
    ("fa3", dict(seq_q=1000, heads_q=2, batch=2, causal=True)),
    ("square", dict(seq_q=500, heads_q=2, causal=True)),
    ("standard", dict(seq_q=300, seq_kv=200, heads_q=2, heads_kv=1, direction="fwd+bwd")),
    ("standard", dict(seq_q=512, heads_q=2)),
    ("flash-decoding", dict(seq_q=1, seq_kv=3000, batch=2, heads_q=8, heads_kv=2)),
    ("flash-decoding", dict(seq_q=3, seq_kv_list=(3000, 700, 3000), batch=3, heads_q=8,
                            heads_kv=2, page_size=64, page_layout="shuffled")),
    ("flash-decoding-cascade", dict(seq_q=1, seq_kv=2500, prefix_len=1024, batch=5, heads_q=4,
                                    heads_kv=1)),
]


@pytest.mark.parametrize("algo,shape", PROBLEMS, ids=lambda v: str(v))
def test_every_cta_has_its_class_shape_and_the_counts_add_up(algo, shape):
    schedule = build_schedule(AttentionProblem(**shape), "h100", algo)
    for k in schedule.kernels:
        reps = k.representatives
        members = Counter()
        for cta in range(k.num_ctas):
            c = k.class_of(cta)
            members[c] += 1
            assert shape_key(k.program(cta)) == shape_key(k.program(reps[c])), (k.name, cta)
            assert k.class_of(cta) == k.class_of(cta % k.class_period)
        assert [members[c] for c in range(len(k.classes))] == [n for _r, n in k.classes]


def test_classes_along_x_groups_equal_keys_and_repeats_with_the_grid_x():
    # x = 0..4; keys 0, 1, 0, 1, 2: three classes of 2, 2 and 1 x-values × 3 CTAs each
    classes, class_of, period = classes_along_x((5, 3, 1), lambda x: min(x % 2 + (x == 4) * 2, 2))
    assert classes == ((0, 6), (1, 6), (4, 3))
    assert period == 5
    assert [class_of(c) for c in range(10)] == [0, 1, 0, 1, 2] * 2


def test_one_class_along_x_has_period_one():
    classes, class_of, period = classes_along_x((7, 2, 2), lambda x: "same")
    assert classes == ((0, 28),) and period == 1 and class_of(13) == 0


def test_edge_classes_only_where_the_tiles_are_ragged():
    # 4×3 tiles, 2 batches: ragged rows and columns give interior 3·2, last column 3, last
    # row 2, corner 1 (× 2 batches)
    classes, class_of, period = classes_by_edges((4, 3, 2))
    assert [n for _r, n in classes] == [12, 6, 4, 2] and period == 12
    assert class_of(3) == 2 and class_of(8) == 1 and class_of(11) == 3 and class_of(12 + 5) == 0
    assert classes_by_edges((4, 3, 2), False, False)[0] == ((0, 24),)
    only_rows = classes_by_edges((4, 3, 2), True, False)
    assert [n for _r, n in only_rows[0]] == [18, 6] and only_rows[2] == 4


def test_a_kernel_of_several_classes_must_say_which_cta_is_in_which():
    with pytest.raises(ValueError, match="class_of"):
        Kernel("k", Launch((2, 1, 1), 128, 0, 32), lambda c: (), ((0, 1), (1, 1)),
               lambda c: (c,))
