"""Fast mode: the waves whose CTAs see the memory differently from the rest of a kernel.

The first wave's CTAs issue their first loads together and queue on the FIFOs behind one
another (fluid.run_kernel reserves them: the burst, then the loads below); the last partial
wave often finds its tiles in L2 already (fast.py gives it classes and L2 figures of its own).
"""
from __future__ import annotations

from dataclasses import dataclass

from .characterize import split_segments
from .pipeline import issue_lead, tile_key


@dataclass(frozen=True, slots=True)
class PrologueTile:
    """A tile a first-wave CTA loads at the start of its first loop."""

    key: tuple        # the L2 tag (tensor, *coord)
    bytes: int
    fetch: float      # fraction of its bytes a first reader fetches from DRAM
    wait: float       # expected DRAM wait the profiles already charge, in tile fetches
    waited: bool      # whether the CTA waits for it before computing


def _first_loads(items, env: dict) -> tuple:
    """(the loads a program issues before its first compute op, as (tile key, bytes), whether
    a compute op was reached), descending into the first iteration of each loop on the way
    (loop variables bound in env)."""
    out = []
    for item in items:
        if item.kind == "loop":
            if item.count < 1:
                continue
            env[item.var] = item.start          # the first iteration's value
            inner = _first_loads(item.body, env)
            out.extend(inner[0])
            if inner[1]:
                return out, True
        elif item.kind == "load":
            out.append((tile_key(item, env), item.bytes))
        elif item.kind in ("mma", "exp", "alu", "store"):
            return out, True
    return out, False


def first_wave_prologues(kernel, group: int, miss: dict, warm_tensors: set,
                         loads: dict | None = None) -> dict:
    """The first loads of each CTA of a kernel's first wave, which queue together on the
    L2 and DRAM servers (fluid.run_kernel): cta → (after_burst, tiles). When the program
    starts with plain ops (the burst, reserved already), the tiles are the loads the loop
    after them issues at its start, as soon as the burst segment is done (after_burst =
    True): its first `stages` iterations (the buffered prologue, or a warp-specialized
    ring); when it starts with a loop, the loads of its first iteration before its first
    compute op, issued at dispatch. tiles: PrologueTile records. A tile no earlier
    kernel touched is fetched by its first reader; one an earlier kernel touched may still be
    in L2 (the replay's miss ratio). loads: first_wave_loads(kernel, group), when known."""
    def tile(key, nbytes, waited):
        tensor = key[0]
        return PrologueTile(key, nbytes,
                            miss.get(tensor, (1.0, 1.0))[0] if tensor in warm_tensors else 1.0,
                            min(1.0, miss.get(tensor, (0.0, 0.0))[1]), waited)

    if loads is None:
        loads = first_wave_loads(kernel, group)
    return {cta: (after_burst, tuple(tile(*t) for t in tiles))
            for cta, (after_burst, tiles) in loads.items()}


def first_wave_loads(kernel, group: int) -> dict:
    """What first_wave_prologues reads of the programs of a kernel's first `group` CTAs:
    cta → (after_burst, ((tile key, bytes, waited), ...)), CTAs with no such tiles left out."""
    out = {}
    ahead = issue_lead(kernel.pipeline.stages) + 1    # iterations issued before 0 computes
    for cta in range(group):
        segs = split_segments(kernel.program(cta))
        after_burst = segs[0][0].kind != "loop"
        if after_burst and (len(segs) < 2 or segs[1][0].kind != "loop"):
            continue
        loop = segs[1][0] if after_burst else segs[0][0]
        if any(i.kind == "loop" for i in loop.body):          # a nest: first iteration's loads
            tiles = tuple((key, nbytes, True) for key, nbytes in _first_loads((loop,), {})[0])
        else:
            body_loads = [i for i in loop.body if i.kind == "load"]
            tiles = tuple((tile_key(ld, {loop.var: loop.value(j)}), ld.bytes, j == 0)
                          for j in range(min(ahead, loop.count)) for ld in body_loads)
        if tiles:
            out[cta] = (after_burst, tiles)
    return out


def tail_wave_start(num_ctas: int, slots: int):
    """The first CTA of a kernel's last, partial wave (None: no such wave)."""
    full = (num_ctas // slots) * slots
    return full if num_ctas > slots and full < num_ctas else None
