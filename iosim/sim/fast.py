"""Fast mode (the default): characterise, dispatch, replay L2, dispatch again.

  1. CTA classes: CTAs whose programs have the same shape (kernel.classes) share one profile
     per residency k, from micro-simulations of one SM (characterize.py).
  2. Dispatch every CTA through the SMs with the fluid bandwidth model (fluid.py).
  3. Replay a sample of the tile accesses, placed in time by step 2, through the LRU L2
     (l2model.py): per kernel and tensor, the miss ratio and the DRAM bytes.
  4. Repeat 1–2 with those miss ratios (expected DRAM latency per load in the micro-
     simulations, DRAM bytes in the fluid demand). The bytes of step 3 and the times of the
     second dispatch are the result.
"""
from __future__ import annotations

from math import ceil

from ..algorithms.common import grid_index
from .characterize import Characterizer, shape_key
from .compute import SmRates
from .engine import busy_of_program, ctas_per_sm
from .fluid import run_kernel
from .l2model import TILES_PER_SAMPLED_CACHE, AccessSampler, replay
from .summary import kernel_result, schedule_result
from .timeline import Timeline

DEFAULT_SAMPLE_BUDGET = 60_000   # sampled tile accesses replayed through the L2 model


class KernelClasses:
    """cta → class index, and one representative program per class."""

    def __init__(self, kernel):
        self.kernel = kernel
        grid = kernel.launch.grid
        reps = [rep for rep, _count in kernel.classes]
        coords = [grid_index(rep, grid) for rep in reps]
        varying = [d for d in range(3) if len({c[d] for c in coords}) > 1]
        size = 1
        for d in varying:
            size *= grid[d]
        index = {tuple(c[d] for d in varying): i for i, c in enumerate(coords)}
        rest = kernel.num_ctas // size if size else 0
        ok = (len(index) == len(reps) == size and
              all(count == rest for _rep, count in kernel.classes) and
              all(c[d] == 0 for c in coords for d in range(3) if d not in varying))
        self.reps = reps
        if ok and self._spot_check(varying, index, grid):
            self.varying, self.index, self.grid = varying, index, grid
            self._map = None
        else:   # enumerate: every CTA's program shape
            self._map = []
            shapes: dict = {}
            self.reps = []
            for cta in range(kernel.num_ctas):
                key = shape_key(kernel.program(cta))
                c = shapes.get(key)
                if c is None:
                    c = shapes[key] = len(self.reps)
                    self.reps.append(cta)
                self._map.append(c)
        self.programs = [kernel.program(rep) for rep in self.reps]

    def _spot_check(self, varying, index, grid) -> bool:
        n = self.kernel.num_ctas
        probes = sorted({n - 1, n // 2, n // 3 + 1, (2 * n) // 3 + 2})
        for cta in probes:
            if cta >= n:
                continue
            c = grid_index(cta, grid)
            rep = self.reps[index[tuple(c[d] for d in varying)]]
            if shape_key(self.kernel.program(cta)) != shape_key(self.kernel.program(rep)):
                return False
        return True

    def __call__(self, cta: int) -> int:
        if self._map is not None:
            return self._map[cta]
        c = grid_index(cta, self.grid)
        return self.index[tuple(c[d] for d in self.varying)]


def prologue_bytes(program, stages: int, miss: dict) -> tuple:
    """(L2, DRAM) bytes a CTA loads before its first loop computes: the loads ahead of the
    first Loop and the first `stages` iterations' loads of that loop (issued at its start)."""
    l2 = dram = 0.0
    for item in program:
        if item.kind == "loop":
            if any(b.kind == "loop" for b in item.body):
                break
            for _ in range(min(stages, item.count)):
                for b in item.body:
                    if b.kind == "load":
                        l2 += b.bytes
                        dram += b.bytes * miss.get(b.tensor, (0.0, 0.0))[0]
            break
        if item.kind == "load":
            l2 += item.bytes
            dram += item.bytes * miss.get(item.tensor, (0.0, 0.0))[0]
    return l2, dram


def _dispatch_all(schedule, gpu, rates, infos, miss, dram_scale, characterizers):
    """Steps 1–2 for every kernel: spans, timeline."""
    timeline = Timeline()
    timeline.kernel_names = [k.name for k in schedule.kernels]
    spans = []
    t = 0.0
    for ki, (kernel, info) in enumerate(zip(schedule.kernels, infos)):
        if ki:
            t += gpu.launch_overhead_s
        classes, occ = info["classes"], info["occ"]
        ch = characterizers[ki]
        miss_key = tuple(sorted(miss[ki].items()))
        profiles = [[ch.profile(p, k, miss_key) for k in range(1, occ + 1)]
                    for p in classes.programs]
        l2_bytes = info["l2_bytes"]
        dram_bytes = [sum(b * miss[ki].get(tn, (0.0, 0.0))[0] for tn, b in lb.items())
                      + sb * dram_scale[ki]
                      for lb, sb in zip(info["load_bytes"], info["store_bytes"])]
        busy = info["busy"]
        stages = max(1, kernel.pipeline.stages)
        burst = [prologue_bytes(p, stages, miss[ki]) for p in classes.programs]

        def emit(cta, sm, s, e, stall, _ki=ki):
            timeline.add(_ki, cta, sm, s, e, stall, busy[classes(cta)])

        end = run_kernel(kernel.num_ctas, classes, profiles, l2_bytes, dram_bytes, occ,
                         gpu.sm_count, gpu.l2_bandwidth_bytes_per_s,
                         gpu.dram_bandwidth_bytes_per_s, t, emit, burst)
        spans.append((t, end, occ))
        t = end
    return timeline, spans


def _l2_pass(schedule, gpu, infos, timeline, capacity_bytes: float, budget: int):
    kernels = schedule.kernels
    accesses = sum(k.totals().loads + k.totals().stores for k in kernels)
    largest = max((b.bytes for k, info in zip(kernels, infos) for p in info["classes"].programs
                   for b in _memory_ops(p)), default=1)
    ratio_cap = max(1, int(capacity_bytes // (TILES_PER_SAMPLED_CACHE * largest)))
    ratio = min(ratio_cap, max(1, ceil(accesses / budget)))
    fraction = min(1.0, budget * ratio / accesses) if accesses else 1.0
    sampler = AccessSampler(ratio)
    cols = timeline.columns
    start = [dict() for _ in kernels]
    for r in range(len(timeline)):
        start[cols["kernel"][r]][cols["cta"][r]] = (cols["start_s"][r], cols["end_s"][r])
    simulated = []
    for ki, k in enumerate(kernels):
        n = k.num_ctas
        limit = n if fraction >= 1.0 else min(n, max(infos[ki]["occ"] * gpu.sm_count,
                                                     ceil(n * fraction)))
        simulated.append(limit)
        stages = max(1, k.pipeline.stages)
        for cta in range(limit):
            s, e = start[ki][cta]
            sampler.cta(ki, k.program(cta), s, e, stages)
    per, flush = replay(sampler.out, capacity_bytes / ratio, len(kernels), gpu.dram_latency_s)
    return per, flush, {"l2_set_sampling_ratio": ratio,
                        "l2_sampled_accesses": len(sampler.out),
                        "l2_simulated_ctas": simulated}


def _memory_ops(items):
    for it in items:
        if it.kind == "loop":
            yield from _memory_ops(it.body)
        elif it.kind in ("load", "store"):
            yield it


def simulate_fast(schedule, gpu, l2_effective_fraction: float,
                  l2_sample_budget: int = DEFAULT_SAMPLE_BUDGET):
    rates = SmRates.of(gpu, schedule.problem.dtype)
    infos = []
    for kernel in schedule.kernels:
        classes = KernelClasses(kernel)
        from ..schedule import program_totals
        tots = [program_totals(p) for p in classes.programs]
        infos.append({"classes": classes, "occ": ctas_per_sm(gpu, kernel),
                      "load_bytes": [dict(t.load_bytes) for t in tots],
                      "store_bytes": [t.bytes_stored for t in tots],
                      "l2_bytes": [t.bytes_loaded + t.bytes_stored for t in tots],
                      "busy": [busy_of_program(p, rates) for p in classes.programs]})
    characterizers = [Characterizer(gpu, rates, k.pipeline) for k in schedule.kernels]
    n_k = len(schedule.kernels)
    capacity = gpu.l2_capacity_bytes * l2_effective_fraction

    # pass 1: everything hits in L2
    timeline, spans = _dispatch_all(schedule, gpu, rates, infos, [{} for _ in range(n_k)],
                                    [0.0] * n_k, characterizers)
    per, flush, sampling = _l2_pass(schedule, gpu, infos, timeline, capacity, l2_sample_budget)

    # scale the sampled L2 counts to every access of every kernel
    miss, dram_scale, mems = [], [], []
    total_store = sum(k.totals().bytes_stored for k in schedule.kernels)
    sampled_store = sum(p["store"] for p in per)
    for kernel, p in zip(schedule.kernels, per):
        tot = kernel.totals()
        sampled_load = sum(p["load"].values())
        overall = (sum(p["miss"].values()) / sampled_load) if sampled_load else 1.0
        ratios = {t: (p["miss"].get(t, 0) / p["load"][t] if p["load"].get(t) else overall)
                  for t in tot.load_bytes}
        waits = {t: (p["wait"].get(t, 0.0) / p["loads"][t] if p["loads"].get(t) else overall)
                 for t in tot.load_bytes}
        store_scale = (tot.bytes_stored / p["store"]) if p["store"] else 0.0
        read = sum(b * ratios[t] for t, b in tot.load_bytes.items())
        miss_bytes = read
        read += p["reduce_read"] * store_scale
        write = p["writeback"] * store_scale
        miss.append({t: (ratios[t], waits[t]) for t in tot.load_bytes})
        dram_scale.append((p["writeback"] + p["reduce_read"]) / p["store"] if p["store"] else 0.0)
        mems.append({"dram_read_bytes": read, "dram_write_bytes": write,
                     "load_miss_bytes": miss_bytes,
                     "load_hit_bytes": tot.bytes_loaded - miss_bytes})
    flush_bytes = flush * (total_store / sampled_store) if sampled_store else 0.0
    if mems:
        mems[-1]["dram_write_bytes"] += flush_bytes

    # pass 2: the same dispatch with the L2's miss ratios
    timeline, spans = _dispatch_all(schedule, gpu, rates, infos, miss, dram_scale,
                                    characterizers)
    kernels = [kernel_result(k, gpu, rates, s, e, occ, m)
               for k, (s, e, occ), m in zip(schedule.kernels, spans, mems)]
    total = {"dram_read_bytes": sum(m["dram_read_bytes"] for m in mems),
             "dram_write_bytes": sum(m["dram_write_bytes"] for m in mems),
             "dram_write_flush_bytes": flush_bytes,
             "load_hit_bytes": sum(m["load_hit_bytes"] for m in mems),
             "load_miss_bytes": sum(m["load_miss_bytes"] for m in mems)}
    model = {"l2_effective_fraction": l2_effective_fraction,
             "l2_effective_capacity_bytes": capacity,
             "l2_policy": "tile-level fully associative LRU, write-allocate, write-back",
             **sampling,
             "micro_simulations": sum(c.simulations for c in characterizers),
             "cta_classes": [len(i["classes"].reps) for i in infos]}
    return schedule_result("fast", schedule, gpu, kernels, total,
                           timeline.sorted_by_kernel_cta(), model)
