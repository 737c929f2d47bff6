"""Which kernels run their waves in lockstep, so that their wait points take their latency
from a short exact simulation of their waves (wave_queue.py; docs/simulator.md, "Lockstep
kernels and wait cohorts"): the loop structure, reuse gaps and per-iteration stores of
their programs."""
from __future__ import annotations

from .pipeline import tile_key


def _loop_counts(items) -> tuple:
    """A program's loop structure: the counts of its loops, nested loops inside."""
    return tuple((it.count, _loop_counts(it.body)) for it in items if it.kind == "loop")


class _GapAbove(Exception):
    """A reuse gap above the caller's bound was found (max_reuse_gap stops walking)."""


def _reuse_gaps(items, env: dict, state: list, bound: float) -> None:
    """Walk a program's loads in issue order; state = [loads seen, key → last position,
    largest number of loads between two loads of one tile]; stops at a gap above `bound`."""
    for it in items:
        if it.kind == "loop":
            for v in it.values():
                env[it.var] = v
                _reuse_gaps(it.body, env, state, bound)
            env.pop(it.var, None)
        elif it.kind == "load":
            key = tile_key(it, env)
            last = state[1].get(key)
            if last is not None and state[0] - last > state[2]:
                state[2] = state[0] - last
                if state[2] > bound:
                    raise _GapAbove
            state[1][key] = state[0]
            state[0] += 1


def max_reuse_gap(program, bound: float = float("inf")) -> float:
    """The most loads a CTA issues between two loads of one tile (0: no tile read twice);
    inf as soon as a gap above `bound` is found (the rest of the program is not walked)."""
    state = [0, {}, 0]
    try:
        _reuse_gaps(program, {}, state, bound)
    except _GapAbove:
        return float("inf")
    return state[2]


def _keeps_reuse_gaps(program, iterations: int) -> bool:
    """Whether cutting the program's loops to `iterations` keeps its largest reuse gap."""
    from .wave_queue import truncated
    cut = max_reuse_gap(truncated(program, iterations))
    return max_reuse_gap(program, bound=cut) == cut


def stores_each_iteration(programs) -> bool:
    """Whether a loop of the programs stores inside its body: every iteration then waits until
    the L2 has accepted the store (pipeline.run_ops), whatever the pipeline's stages (FA-2's
    backward: each iteration's dQaccum reduction)."""
    return any(it.kind == "loop" and (any(op.kind == "store" for op in it.body)
                                      or stores_each_iteration((it.body,)))
               for p in programs for it in p)


def lockstep_waves(kernel, info) -> bool:
    """Whether a kernel's wait points take their latency from its wave (wave_queue.py):
    a synchronous loop (stages = 1: every iteration waits for its own loads, so CTAs that
    share a tile stay in lockstep; or a loop that stores each iteration: it waits for the
    L2 to accept the store, and CTAs released together by a shared tile reach the L2 FIFO
    together: FA-2's backward, whose dQaccum reductions wait ~2 µs on exact mode's FIFO),
    every CTA class with the same loop counts, and loops cut
    to WAVE_ITERATIONS that keep each class's reuse gaps (the wave then repeats fewer of the
    same iterations: what one iteration loads, its hits and the CTAs' relative phases stay).
    Classes of different lengths (a causal grid) would be cut into a lockstep the full kernel
    does not have, and a cut loop between two reads of a tile shortens its reuse (FA-1's
    Q/O loops: the wave's wait 330 ns against the full kernel's 211)."""
    from .wave_queue import WAVE_ITERATIONS
    return ((kernel.pipeline.stages == 1 or stores_each_iteration(info.programs))
            and any(it.kind == "loop" for p in info.programs for it in p)
            and len({_loop_counts(p) for p in info.programs}) == 1
            and all(_keeps_reuse_gaps(p, WAVE_ITERATIONS) for p in info.programs))
