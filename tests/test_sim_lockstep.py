"""The fast mode's lockstep wait points: which kernels take them from their wave
(lockstep.lockstep_waves, lockstep.max_reuse_gap) and how a micro-simulation's loads use them
(characterize._WaitPointMemory)."""
import pytest

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.schedule import Load, Store, loop
from iosim.sim.characterize import _WaitPointMemory
from iosim.sim.fast import KernelInfo
from iosim.sim.lockstep import lockstep_waves, max_reuse_gap, stores_each_iteration
from iosim.sim.memory import Server

H100 = load_gpu("h100")


def _load(tensor: str, coord: tuple) -> Load:
    return Load(tensor, coord, 1, 64, 64)


def test_reuse_gap_counts_the_loads_between_two_loads_of_one_tile():
    # Q re-read every iteration behind one K: 2 loads from one Q to the next
    prog = tuple(loop("j", 0, 5, (_load("Q", (0,)), _load("K", ("j",)))))
    assert max_reuse_gap(prog) == 2
    # 4 Q tiles, re-read once per outer iteration: 4 loads apart
    nest = tuple(loop("j", 0, 3, tuple(loop("i", 0, 4, (_load("Q", ("i",)),)))))
    assert max_reuse_gap(nest) == 4
    assert max_reuse_gap(tuple(loop("j", 0, 5, (_load("K", ("j",)),)))) == 0


def test_reuse_gap_counts_from_where_the_tile_was_last_loaded_not_from_the_start():
    # X, then A B C A: A's two loads are at positions 1 and 4, three loads apart
    prog = (_load("X", (0,)), _load("A", (0,)), _load("B", (0,)), _load("C", (0,)),
            _load("A", (0,)))
    assert max_reuse_gap(prog) == 3
    # a shorter gap after it (D D) leaves the largest as it was
    assert max_reuse_gap(prog + (_load("D", (0,)), _load("D", (0,)))) == 3


def test_reuse_gap_stops_at_the_first_gap_above_its_bound():
    nest = tuple(loop("j", 0, 3, tuple(loop("i", 0, 4, (_load("Q", ("i",)),)))))
    assert max_reuse_gap(nest, bound=4) == 4
    assert max_reuse_gap(nest, bound=3) == float("inf")


@pytest.mark.parametrize("algorithm,causal,expected", [
    ("square", False, True),      # synchronous, one loop shape, only outer repetitions cut
    ("square", True, False),      # causal classes of different lengths
    ("fa1", False, False),        # its cut inner Q/O loop shortens the re-reads' gaps
    ("fa2", False, False),        # buffered (stages 2)
])
def test_which_kernels_take_their_wait_points_from_the_wave(algorithm, causal, expected):
    schedule = build_schedule(AttentionProblem(seq_q=4096, heads_q=8, causal=causal), H100,
                              algorithm)
    kernel = schedule.kernels[0]
    assert lockstep_waves(kernel, KernelInfo.of(kernel, H100, "fp16")) is expected


def test_a_loop_that_stores_each_iteration_waits_for_the_l2_each_iteration():
    store = Store("O", (0,), 1, 64, 64)
    in_loop = tuple(loop("j", 0, 5, (_load("K", ("j",)), store)))
    after = tuple(loop("j", 0, 5, (_load("K", ("j",)),))) + (store,)
    nested = tuple(loop("i", 0, 2, tuple(loop("j", 0, 5, (_load("K", ("j",)), store)))))
    assert stores_each_iteration((in_loop,)) is True
    assert stores_each_iteration((after,)) is False
    assert stores_each_iteration((nested,)) is True


@pytest.mark.parametrize("causal,expected", [
    (False, True),    # buffered, but every iteration waits for its dQaccum reduction
    (True, False),    # causal classes of different lengths
])
def test_fa2_backward_takes_its_wait_points_from_the_wave(causal, expected):
    schedule = build_schedule(AttentionProblem(seq_q=4096, heads_q=8, causal=causal,
                                               direction="bwd"), H100, "fa2")
    kernel = next(k for k in schedule.kernels if k.name == "fa2_bwd")
    assert kernel.pipeline.stages == 2
    assert lockstep_waves(kernel, KernelInfo.of(kernel, H100, "fp16")) is expected


def _memory(points: dict):
    mem = _WaitPointMemory(Server(1e12), Server(1e12), 100e-9, 500e-9, {}, 0.0)
    mem.use_points(points)
    return mem


def test_a_known_wait_points_loads_take_its_latency():
    mem = _memory({("Q", "K"): 700e-9})
    # Q opens the known point (Q, K): the wave measured issue to last tile over both loads
    first = mem.load(("Q", 0), "Q", 64, 1e-6)
    last = mem.load(("K", 0), "K", 64, 1e-6)
    assert first == pytest.approx(1e-6 + 700e-9)
    assert last == pytest.approx(1e-6 + 700e-9)


def test_a_load_that_opens_no_known_wait_point_keeps_the_expected_memory():
    mem = _memory({("Q", "K"): 700e-9})
    # V opens no known point: its own transfer (64 B at 1 TB/s) and the L2 latency
    assert mem.load(("V", 0), "V", 64, 1e-6) == pytest.approx(1e-6 + 64e-12 + 100e-9)


def test_a_new_instant_or_a_repeated_tensor_opens_a_new_wait_point():
    mem = _memory({("Q", "K"): 700e-9})
    mem.load(("Q", 0), "Q", 64, 1e-6)
    later = mem.load(("K", 0), "K", 64, 2e-6)            # another instant: K alone
    assert later == pytest.approx(2e-6 + 64e-12 + 100e-9)
    mem.load(("Q", 1), "Q", 64, 3e-6)
    mem.load(("Q", 2), "Q", 64, 3e-6)                    # a second CTA's Q, same instant
    assert mem.load(("K", 1), "K", 64, 3e-6) == pytest.approx(3e-6 + 700e-9)


def test_a_store_waits_for_its_tensors_wave_latency():
    mem = _memory({("store", "O"): 300e-9})
    assert mem.store(("O", 0), "O", 64, False, 1e-6) == pytest.approx(1e-6 + 300e-9)
    # a tensor without one: until this SM's own port has taken its bytes
    assert mem.store(("L", 0), "L", 64, False, 2e-6) == pytest.approx(2e-6 + 64e-12)
