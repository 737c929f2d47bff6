"""sim/l1.py piece by piece against independent references: the probe table read with the csv
module and interpolated with numpy.interp, carve-outs worked out by hand from Hopper's list,
an LRU stack kept as a plain list, and whole programs walked op by op through that list."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from iosim.hardware import load_gpu
from iosim.paths import VALIDATION_DIR
from iosim.schedule import Launch, Load, Store, expand, loop
from iosim.sim import l1
from iosim.l1_curve import carveout_bytes, hit_probability, l1_capacity_bytes
from iosim.sim.l1 import L1Front, L1Stack, SmL1, exact_l1, program_l1_hits

H200 = load_gpu("h200-calibrated")
KIB = 1024


def probe_table() -> dict:
    """capacity → (distances, hit fractions) of the FA-1-like rows (mode 0, 8 KB fills)."""
    out: dict = {}
    with open(VALIDATION_DIR / "l1_probe.csv", newline="") as f:
        for r in csv.DictReader(f):
            if r["mode"] == "0" and r["fill"] == "8192":
                out.setdefault(int(r["l1_bytes"]), []).append(
                    (int(r["stack_distance_bytes"]), float(r["hit_fraction"])))
    return {c: tuple(np.array(v) for v in zip(*sorted(p))) for c, p in sorted(out.items())}


TABLE = probe_table()
CAPS = sorted(TABLE)


def test_the_table_has_four_capacities_of_fa1_like_rows():
    assert len(CAPS) == 4


@pytest.mark.parametrize("cap", CAPS)
def test_at_a_measured_capacity_every_measured_point_is_returned(cap):
    xs, ys = TABLE[cap]
    for x, y in zip(xs, ys):
        assert hit_probability(float(x), cap) == pytest.approx(y, abs=1e-12)


@pytest.mark.parametrize("cap", CAPS)
def test_between_measured_distances_the_probability_is_linear_and_flat_outside(cap):
    xs, ys = TABLE[cap]
    for x in np.linspace(0, xs[-1] * 1.5, 37):
        assert hit_probability(float(x), cap) == pytest.approx(np.interp(x, xs, ys), abs=1e-12)


def test_between_two_measured_capacities_the_curves_mix_by_capacity_at_one_ratio():
    c0, c1 = CAPS[1], CAPS[2]
    cap = c0 + 0.25 * (c1 - c0)
    for ratio in (0.5, 0.9, 1.2, 1.6, 2.2):
        want = 0.75 * np.interp(ratio * c0, *TABLE[c0]) + 0.25 * np.interp(ratio * c1, *TABLE[c1])
        assert hit_probability(ratio * cap, cap) == pytest.approx(want, abs=1e-12)


def test_outside_the_measured_capacities_the_nearest_curves_shape_is_scaled():
    lo, hi = CAPS[0], CAPS[-1]
    for ratio in (0.4, 0.8, 1.1, 1.5):
        assert hit_probability(ratio * 10_000, 10_000) == \
            pytest.approx(np.interp(ratio * lo, *TABLE[lo]), abs=1e-12)
        assert hit_probability(ratio * 200_000, 200_000) == \
            pytest.approx(np.interp(ratio * hi, *TABLE[hi]), abs=1e-12)


def test_no_capacity_no_hits():
    assert hit_probability(0.0, 0) == 0.0
    assert hit_probability(0.0, -5) == 0.0
    # any positive capacity reads the curves (the smallest one's shape below it)
    assert hit_probability(0.0, 1) == pytest.approx(TABLE[CAPS[0]][1][0], abs=1e-12)


# ---- carve-outs (Hopper: 0, 8, 16, 32, 64, 100, 132, 164, 196, 228 KB; 1 KB per CTA) ----------
def _launch(smem: int, static: int = 0) -> Launch:
    return Launch((132, 1, 1), 128, smem, 32, static_smem_bytes=static)


@pytest.mark.parametrize("smem,static,ctas,want_kib", [
    (99 * KIB, 0, 1, 100),        # 99 + 1 KB: exactly the 100 KB configuration
    (99 * KIB + 1, 0, 1, 132),    # one byte more: the next one
    (20 * KIB, 4 * KIB, 2, 64),   # 2 × (20 + 4 + 1) = 50 KB
    (31 * KIB, 0, 1, 32),         # 31 + 1: exactly 32
    (0, 0, 1, 8),                 # the reserve alone
])
def test_the_carveout_is_the_smallest_configuration_holding_the_ctas(smem, static, ctas, want_kib):
    assert carveout_bytes(H200, _launch(smem, static), ctas) == want_kib * KIB
    assert l1_capacity_bytes(H200, _launch(smem, static), ctas) == (256 - want_kib) * KIB


def test_shared_memory_beyond_the_largest_configuration_has_no_carveout():
    assert carveout_bytes(H200, _launch(114 * KIB), 2) is None     # 2 × 115 KB > 228 KB
    assert l1_capacity_bytes(H200, _launch(114 * KIB), 2) == 0


def test_a_gpu_whose_shared_memory_is_not_hoppers_has_no_carveout():
    a100 = load_gpu("a100")
    assert carveout_bytes(a100, _launch(KIB), 1) is None


# ---- the stack ------------------------------------------------------------------------------
def test_a_tiles_distance_is_the_bytes_of_the_others_touched_since():
    s = L1Stack(1e9)
    s.touch("A", 100)
    s.touch("B", 200)
    s.touch("C", 300)
    assert (s.distance("A"), s.distance("B"), s.distance("C")) == (500, 300, 0)
    s.touch("A", 100)
    assert (s.distance("A"), s.distance("B"), s.distance("C")) == (0, 400, 100)
    assert s.distance("D") is None


def test_the_stack_drops_its_oldest_tiles_past_its_depth_and_counts_them():
    s = L1Stack(1000.0)
    depth = s.depth_bytes
    # the deepest measured point, in capacities (the curves are ~0 there)
    assert depth == pytest.approx(1000.0 * max(TABLE[c][0][-1] / c for c in CAPS), rel=1e-12)
    n = int(depth // 100)
    for k in range(n + 3):                       # three tiles more than the depth holds
        s.touch(k, 100)
    assert s.evictions == 3
    assert list(s.lines)[0] == 3 and s.used_bytes == 100 * n
    s.touch("big", int(depth) * 2)               # a tile larger than the depth stays alone
    assert list(s.lines) == ["big"] and s.evictions == 3 + n


def test_a_stack_filled_exactly_to_its_depth_keeps_every_tile():
    cap = max(CAPS, key=lambda c: TABLE[c][0][-1] / c)    # its depth is a whole number of bytes
    s = L1Stack(float(cap))
    depth = int(TABLE[cap][0][-1])
    assert s.depth_bytes == depth
    s.touch("A", depth - 1000)
    s.touch("B", 1000)
    assert list(s.lines) == ["A", "B"] and s.evictions == 0
    s.touch("C", 1)
    assert list(s.lines) == ["B", "C"] and s.evictions == 1


def test_a_hit_probability_is_read_at_the_stretched_distance():
    cap = float(CAPS[2])
    s = L1Stack(cap)
    s.touch("A", 8192)
    s.touch("B", int(cap))
    assert s.hit_probability("A") == pytest.approx(hit_probability(cap, cap), abs=1e-12)
    assert s.hit_probability("A", 1.5) == pytest.approx(hit_probability(1.5 * cap, cap), abs=1e-12)
    assert s.hit_probability("nothing") == 0.0


def test_error_diffusion_hits_follow_the_sum_of_probabilities(monkeypatch):
    sm = SmL1(1e6)
    # the stack asks the module's hit_probability: make every reuse a 1/4 chance
    monkeypatch.setattr(l1, "hit_probability", lambda d, c: 0.25)
    sm.stack.touch("A", 10)
    hits = [sm.load("A", 10) for _ in range(10)]
    # credit 0.25, 0.5→hit (−0.5), −0.25, 0, 0.25, 0.5→hit, −0.25, 0, 0.25, 0.5→hit
    assert hits == [False, True, False, False, False, True, False, False, False, True]


def test_a_tile_never_touched_never_hits():
    sm = SmL1(1e6)
    assert [sm.load(("A", k), 10) for k in range(5)] == [False] * 5


class _Mem:
    def __init__(self):
        self.calls = []

    def load(self, key, tensor, nbytes, now_s, oob_bytes=0, misaligned=False, multicast=1):
        self.calls.append(("load", key))
        return now_s + 1.0

    def store(self, key, tensor, nbytes, reduce, now_s, layout="coalesced", partial_sectors=0,
              misaligned=False):
        self.calls.append(("store", key))
        return now_s + 2.0


def test_the_front_serves_hits_after_the_l1_latency_and_passes_the_rest_on():
    mem, counts = _Mem(), {"l1_hit_bytes": 0, "l1_load_bytes": 0}
    front = L1Front(mem, SmL1(1e6), frozenset({"l"}), 0.25, counts)
    assert front.store(("l", 0), "l", 64, None, 0.0) == 2.0        # allocates, then to memory
    assert front.load(("l", 0), "l", 64, 5.0) == 5.25               # a hit, after the latency
    assert front.load(("K", 0), "K", 64, 5.0) == 6.0                # not an L1 tensor
    assert front.load(("l", 1), "l", 64, 5.0) == 6.0                # an L1 miss
    assert counts == {"l1_hit_bytes": 64, "l1_load_bytes": 128}
    assert mem.calls == [("store", ("l", 0)), ("load", ("K", 0)), ("load", ("l", 1))]


def test_an_atomic_store_does_not_enter_the_stack():
    sm = SmL1(1e6)
    front = L1Front(_Mem(), sm, frozenset({"l"}), 0.0, {"l1_hit_bytes": 0, "l1_load_bytes": 0})
    front.store(("dQ", 0), "dQ", 64, "add", 0.0)
    front.store(("O", 0), "O", 64, None, 0.0)
    assert list(sm.stack.lines) == [("O", 0)]


def test_exact_mode_has_an_l1_only_for_kernels_with_l1_loads_on_gpus_with_an_l1():
    from iosim import AttentionProblem
    from iosim.algorithms import build_schedule
    p = AttentionProblem(batch=2, heads_q=4, seq_q=1024, head_dim=64, dtype="fp16")
    fa1 = build_schedule(p, "h200", "fa1").kernels[0]
    fa2 = build_schedule(p, "h200", "fa2").kernels[0]
    tensors, cap = exact_l1(H200, fa1, 1)
    assert tensors == frozenset({"l", "m"})
    assert cap == l1_capacity_bytes(H200, fa1.launch, 1) > 0
    assert exact_l1(H200, fa2, 1) is None
    assert exact_l1(load_gpu("a100"), fa1, 1) is None
    # more resident CTAs than any carve-out holds: no L1 left beside it
    many = 228 * KIB // (fa1.launch.smem_bytes_per_cta + fa1.launch.static_smem_bytes + KIB) + 1
    assert l1_capacity_bytes(H200, fa1.launch, many) == 0
    assert exact_l1(H200, fa1, many) is None


def test_the_fast_modes_stretch_is_the_ctas_an_sm_holds_at_once():
    # three CTAs per SM asked for: a 16-CTA grid still runs them alone, a 1024-CTA one three
    from iosim import AttentionProblem
    from iosim.algorithms import build_schedule
    from iosim.machine import occupancy
    from iosim.sim.l1 import kernel_l1_hit_bytes
    for batch, stretch in ((1, 1.0), (64, 3.0)):
        p = AttentionProblem(batch=batch, heads_q=16, seq_q=512, head_dim=64, dtype="fp16")
        k = build_schedule(p, "h200", "fa1").kernels[0]
        assert k.num_ctas == 16 * batch
        cap = l1_capacity_bytes(H200, k.launch, occupancy(H200, k.launch))
        expected = sum(n * program_l1_hits(k.program(rep), cap, stretch)[0]
                       for rep, n in k.classes)
        assert expected > 0
        assert kernel_l1_hit_bytes(H200, k, ctas_per_sm=3) == pytest.approx(expected, rel=1e-12)
    assert program_l1_hits(k.program(0), cap, 3.0)[0] < program_l1_hits(k.program(0), cap, 1.0)[0]


# ---- whole programs against a plain-list LRU stack --------------------------------------------
def _reference_hits(program, cap: float, stretch: float) -> tuple:
    """Every op of the expanded program through an unbounded LRU stack kept as a list."""
    stack: list = []                       # [(key, bytes)], most recent last
    hit = total = 0.0
    for op in expand(program):
        if not ((op.kind == "load" and op.l1) or (op.kind == "store" and not op.reduce)):
            continue
        key = (op.tensor, *op.coord)
        keys = [k for k, _ in stack]
        if op.kind == "load":
            total += op.bytes
            if key in keys:
                at = keys.index(key)
                d = sum(b for _, b in stack[at + 1:])
                hit += op.bytes * hit_probability(d * stretch, cap)
        stack = [(k, b) for k, b in stack if k != key] + [(key, op.bytes)]
    return hit, total


def _ld(t, coord, n):
    return Load(t, coord, 1, 1, n, l1=True)


CAP = float(CAPS[2])      # its curve reaches 0 within the stack's depth: no truncation effect
PROGRAMS = {
    # a loop whose L1 tiles stay put (counted once the stack repeats)
    "periodic": loop("j", 0, 40, (_ld("l", (7,), 4096), _ld("m", (7,), 4096),
                                  Store("O", (7,), 1, 1, 30_000))),
    # a loop whose tiles move with it, around a tile it re-reads every iteration: steady
    # iterations hit the fixed tile (counted once the stack is flushed)
    "moving": loop("i", 0, 60, (_ld("a", ("i",), 9000), _ld("b", (0,), 2048),
                                Store("c", ("i",), 1, 1, 12_000))),
    # passes over a moving loop whose tiles come back at fractional hit probabilities
    "passes": loop("j", 0, 4, loop("i", 0, 11, (_ld("l", ("i",), 8192),
                                                Store("O", ("i",), 1, 1, 4096)))),
    # a stack touched before a loop whose tiles stay put: its first iteration hits already
    "periodic_after_init": (Store("l", (7,), 1, 1, 4096), Store("m", (7,), 1, 1, 4096))
    + loop("j", 0, 40, (_ld("l", (7,), 4096), _ld("m", (7,), 4096),
                        Store("O", (7,), 1, 1, 30_000))),
    # a long moving loop, then re-reads of its last tiles: the stack it leaves must be the
    # one walking every iteration leaves
    "moving_then_reread": loop("i", 0, 80, (_ld("a", ("i",), 9000), _ld("b", (0,), 2048)))
    + loop("i", 60, 80, (_ld("a", ("i",), 9000),)),
    # a short moving loop that never fills the stack, then a long one after it
    "short_then_long": (loop("i", 0, 3, (_ld("x", ("i",), 1000),))
                        + loop("k", 0, 50, (_ld("y", ("k",), 7000), _ld("x", (1,), 1000)))),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("stretch", [1.0, 1.7])
def test_counting_a_program_equals_walking_it_through_a_plain_lru_list(name, stretch):
    program = PROGRAMS[name]
    got = program_l1_hits(program, CAP, stretch)
    want = _reference_hits(program, CAP, stretch)
    assert want[0] > 0.5 * 4096                    # the case hits (not a test of zeros)
    assert got[1] == want[1]
    assert got[0] == pytest.approx(want[0], rel=1e-9)


@pytest.mark.parametrize("program,load_bytes", [
    (loop("i", 0, 3000, (_ld("a", ("i",), 9000), _ld("b", (0,), 2048))), 3000 * 11048),  # move
    (loop("j", 0, 3000, (_ld("l", (7,), 4096), Store("O", (7,), 1, 1, 30_000))), 3000 * 4096),
])
def test_a_long_loop_is_counted_not_walked(program, load_bytes, monkeypatch):
    touches = []
    touch = L1Stack.touch
    monkeypatch.setattr(L1Stack, "touch", lambda self, k, n: touches.append(k) or touch(self, k, n))
    program_l1_hits.cache_clear()
    hit, total = program_l1_hits(program, CAP)
    assert total == load_bytes
    assert hit > 0
    assert len(touches) < 300              # of the 6000 touches a walk of every op makes
