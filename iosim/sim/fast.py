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

from ..schedule import program_totals
from .characterize import Characterizer, shape_key, split_segments
from .classes import KernelClasses
from ..machine import SmRates, tensor_server_busy_s
from .engine import busy_of_program, ctas_per_sm, kernel_mma_cost, kernel_rates
from .first_wave import first_wave_prologues, tail_wave_start
from .fluid import run_kernel
from .l2model import TILES_PER_SAMPLED_CACHE, AccessSampler, replay
from .summary import kernel_result, schedule_result
from .timeline import Timeline

DEFAULT_SAMPLE_BUDGET = 50_000   # sampled tile accesses replayed through the L2 model


def segment_bytes(program, miss: dict, dram_store_ratio: float) -> tuple:
    """Per segment: (L2↔SM bytes, expected DRAM bytes, the fraction of its load bytes that
    wait for DRAM: misses and hits on lines still in flight, capped at 1). Write-backs are
    DRAM bytes nobody waits for: a load that hits in L2 does not queue behind them."""
    l2, dram, wait = [], [], []
    for seg in split_segments(program):
        t = program_totals(seg)
        l2.append(t.bytes_loaded + t.bytes_stored)
        dram.append(sum(b * miss.get(tn, (0.0, 0.0))[0] for tn, b in t.load_bytes.items())
                    + t.bytes_stored * dram_store_ratio)
        wait.append(sum(b * min(1.0, miss.get(tn, (0.0, 0.0))[1])
                        for tn, b in t.load_bytes.items()) / t.bytes_loaded
                    if t.bytes_loaded else 0.0)
    return l2, dram, wait


def _tensors(program) -> set:
    return {op.tensor for op in _memory_ops(program)}


def _dispatch_all(schedule, gpu, infos, miss, dram_scale, characterizers, keep_marks,
                  limits=None, cold_start: bool = False, first_loads_queue: bool = True,
                  tail_miss=None, l2_queue=None):
    """Steps 1–2 for every kernel: spans, timeline, segment end times of the CTAs.
    limits[ki]: dispatch only the first CTAs of each kernel (their times barely depend on
    the CTAs launched after them)."""
    timeline = Timeline()
    timeline.kernel_names = [k.name for k in schedule.kernels]
    spans, marks = [], []
    t = 0.0
    l2_queue = l2_queue or [0.0] * len(schedule.kernels)
    touched: set = set()        # tensors earlier kernels loaded or stored
    for ki, (kernel, info) in enumerate(zip(schedule.kernels, infos)):
        if ki:
            t += gpu.launch_overhead_s
        classes, occ = info["classes"], info["occ"]
        ch = characterizers[ki]
        # the last partial wave may find its tiles in L2 already (an earlier wave fetched
        # them): its CTAs are classes of their own, with the replay's figures for them
        cohort_miss = [miss[ki]]
        tail_start = tail_wave_start(kernel.num_ctas, occ * gpu.sm_count)
        if tail_miss is not None and tail_miss[ki] is not None and tail_start is not None:
            cohort_miss.append(tail_miss[ki])
        # (miss figures, profile memo key: the figures and the L2 queue factor)
        cohorts = [(m, (tuple(sorted(m.items())), l2_queue[ki])) for m in cohort_miss]
        n_cls = len(classes.programs)
        programs = list(classes.programs) * len(cohorts)
        shapes = info["shapes"] * len(cohorts)
        seg_l2, seg_dram, seg_wait, bytes_by_shape = [], [], [], {}
        for i, (p, shape) in enumerate(zip(programs, shapes)):
            c_miss = cohorts[i // n_cls][0]
            ab = bytes_by_shape.get((shape, i // n_cls))
            if ab is None:
                ab = bytes_by_shape[shape, i // n_cls] = segment_bytes(p, c_miss, dram_scale[ki])
            seg_l2.append(ab[0])
            seg_dram.append(ab[1])
            seg_wait.append(ab[2])
        # the first wave's first segments all queue at once: how long until the last has data
        group = min(kernel.num_ctas, occ * gpu.sm_count)
        mean_l2 = sum(b[0] for b in seg_l2[:n_cls]) / n_cls
        mean_dram = sum(b[0] for b in seg_dram[:n_cls]) / n_cls
        span = group * max(mean_l2 / gpu.l2_bandwidth_bytes_per_s,
                           mean_dram / gpu.dram_bandwidth_bytes_per_s)
        by_shape: dict = {}          # classes of one shape share their profiles
        seg_profiles = []
        for i, (p, shape) in enumerate(zip(programs, shapes)):
            c_key = cohorts[i // n_cls][1]
            prof = by_shape.get((shape, c_key))
            if prof is None:
                prof = by_shape[shape, c_key] = [ch.segment_profiles(p, k, c_key, span)
                                                 for k in range(1, occ + 1)]
            seg_profiles.append(prof)
        if len(cohorts) > 1:
            def class_of(cta, _c=classes, _n=n_cls, _t=tail_start):
                return _c(cta) + (_n if cta >= _t else 0)
        else:
            class_of = classes
        burst_first = [bool(p) and p[0].kind != "loop" for p in programs]
        prologues = (first_wave_prologues(kernel, group, miss[ki],
                                          set() if cold_start else touched)
                     if first_loads_queue else None)
        if not cold_start:
            for p in classes.programs:
                touched |= _tensors(p)
        busy = info["busy"] * len(cohorts)
        kmarks = {} if keep_marks(ki) else None

        rows = [None] * kernel.num_ctas     # the timeline lists CTAs in launch order

        def emit(cta, cls, sm, s, e, stall, seg_ends, _ki=ki, _marks=kmarks, _rows=rows):
            _rows[cta] = (_ki, cta, sm, s, e, stall, busy[cls])
            if _marks is not None and keep_marks(_ki, cta):
                _marks[cta] = (s, tuple(seg_ends))

        end = run_kernel(kernel.num_ctas if limits is None else limits[ki], class_of, seg_profiles,
                         seg_l2, seg_dram, seg_wait, occ,
                         gpu.sm_count, gpu.l2_bandwidth_bytes_per_s,
                         gpu.dram_bandwidth_bytes_per_s, t, emit, burst_first,
                         kmarks is not None, prologues,
                         gpu.dram_latency_s)
        timeline.extend_in_order([r for r in rows if r is not None])
        spans.append((t, end, occ))
        marks.append(kmarks)
        t = end
    return timeline, spans, marks


class SamplingPlan:
    """Set-sampling ratio and, per kernel, how many CTAs (in launch order) the L2 replays:
    the same fraction of every kernel, at least one wave each."""

    def __init__(self, schedule, gpu, infos, capacity_bytes: float, budget: int):
        kernels = schedule.kernels
        accesses = sum(i["totals"].loads + i["totals"].stores for i in infos)
        largest = max((b.bytes for info in infos for p in info["classes"].programs
                       for b in _memory_ops(p)), default=1)
        cap = max(1, int(capacity_bytes // (TILES_PER_SAMPLED_CACHE * max(1, largest))))
        self.ratio = min(cap, max(1, ceil(accesses / budget)))
        fraction = min(1.0, budget * self.ratio / accesses) if accesses else 1.0
        # every replayed CTA's program is built and walked, sampled tiles or not: at most
        # `budget` CTAs (many tiny CTAs would otherwise cost more than their accesses)
        ctas = sum(k.num_ctas for k in kernels)
        if ctas > budget:
            fraction = min(fraction, budget / ctas)
        self.limits = [k.num_ctas if fraction >= 1.0 else
                       min(k.num_ctas, max(info["occ"] * gpu.sm_count, ceil(k.num_ctas * fraction)))
                       for k, info in zip(kernels, infos)]

    def __call__(self, ki: int, cta: int = 0) -> bool:
        return cta < self.limits[ki]


def _l2_sample(schedule, plan: SamplingPlan, marks, tail_starts):
    sampler = AccessSampler(plan.ratio)
    for ki, k in enumerate(schedule.kernels):
        stages = max(1, k.pipeline.stages)
        kmarks = marks[ki]
        tail = tail_starts[ki] if tail_starts[ki] is not None else k.num_ctas
        for cta in range(plan.limits[ki]):
            start_s, seg_ends = kmarks[cta]
            sampler.cta(ki, split_segments(k.program(cta)), start_s, seg_ends, stages,
                        int(cta >= tail))
    return sampler.out, {"l2_set_sampling_ratio": plan.ratio,
                         "l2_sampled_accesses": len(sampler.out),
                         "l2_simulated_ctas": list(plan.limits)}


def _scale(infos, per, flush):
    """Scale the sampled L2 counts to every access of every kernel: per-kernel miss figures
    for the dispatch (all CTAs; the last partial wave's CTAs, None where none was sampled),
    DRAM store ratios, per-kernel memory counters, final flush bytes."""
    miss, tail_miss, dram_scale, mems = [], [], [], []
    l2_queue = [p["l2_queue_position"] for p in per]
    total_store = sum(i["totals"].bytes_stored for i in infos)
    sampled_store = sum(p["store"] for p in per)
    for info, p in zip(infos, per):
        tot = info["totals"]
        sampled_load = sum(p["load"].values())
        overall = (sum(p["miss"].values()) / sampled_load) if sampled_load else 1.0
        ratios = {t: (p["miss"].get(t, 0) / p["load"][t] if p["load"].get(t) else overall)
                  for t in tot.load_bytes}
        waits = {t: (p["wait"].get(t, 0.0) / p["loads"][t] if p["loads"].get(t) else overall)
                 for t in tot.load_bytes}
        store_scale = (tot.bytes_stored / p["store"]) if p["store"] else 0.0
        miss_bytes = sum(b * ratios[t] for t, b in tot.load_bytes.items())
        read = miss_bytes + p["reduce_read"] * store_scale
        write = p["writeback"] * store_scale
        miss.append({t: (ratios[t], waits[t]) for t in tot.load_bytes})
        tail = p["tail"]
        tail_miss.append({t: ((tail["miss"][t] / tail["load"][t], tail["wait"][t] / tail["loads"][t])
                              if tail["load"].get(t) else miss[-1][t]) for t in tot.load_bytes}
                         if tail["load"] else None)
        dram_scale.append((p["writeback"] + p["reduce_read"]) / p["store"] if p["store"] else 0.0)
        mems.append({"dram_read_bytes": read, "dram_write_bytes": write,
                     "load_miss_bytes": miss_bytes,
                     "load_hit_bytes": tot.bytes_loaded - miss_bytes})
    flush_bytes = flush * (total_store / sampled_store) if sampled_store else 0.0
    if mems:
        mems[-1]["dram_write_bytes"] += flush_bytes
    return miss, tail_miss, dram_scale, mems, flush_bytes, l2_queue


def _memory_ops(items):
    for it in items:
        if it.kind == "loop":
            yield from _memory_ops(it.body)
        elif it.kind in ("load", "store"):
            yield it


def simulate_fast(schedule, gpu, l2_effective_fraction: float,
                  l2_sample_budget: int = DEFAULT_SAMPLE_BUDGET, l2_protocol: str = "warm",
                  time_protocol: str | None = None):
    """l2_protocol decides the bytes; time_protocol (default: the same) the L2 state the
    timed dispatch sees. Both replays share one placement of the accesses (pass 1)."""
    time_protocol = time_protocol or l2_protocol
    rates = SmRates.of(gpu, schedule.problem.dtype)      # the servers run at the wgmma rate
    infos = []
    for kernel in schedule.kernels:
        classes = KernelClasses(kernel)
        k_rates = kernel_rates(gpu, schedule.problem.dtype, kernel)
        infos.append({"classes": classes, "occ": ctas_per_sm(gpu, kernel),
                      "totals": kernel.totals(),
                      "shapes": [shape_key(p) for p in classes.programs],
                      "rates": k_rates,
                      "busy": [busy_of_program(p, k_rates) for p in classes.programs]})
    characterizers = [Characterizer(gpu, rates, k.pipeline,
                                    kernel_mma_cost(gpu, schedule.problem, k))
                      for k in schedule.kernels]
    n_k = len(schedule.kernels)
    capacity = gpu.l2_capacity_bytes * l2_effective_fraction
    plan = SamplingPlan(schedule, gpu, infos, capacity, l2_sample_budget)

    # pass 1: everything hits in L2; where are the sampled CTAs' segments in time
    timeline, spans, marks = _dispatch_all(schedule, gpu, infos, [{} for _ in range(n_k)],
                                           [0.0] * n_k, characterizers, plan, plan.limits,
                                           first_loads_queue=False)
    tail_starts = [tail_wave_start(k.num_ctas, i["occ"] * gpu.sm_count)
                   for k, i in zip(schedule.kernels, infos)]
    accesses, sampling = _l2_sample(schedule, plan, marks, tail_starts)
    del marks
    by_protocol = {}
    for protocol in dict.fromkeys((l2_protocol, time_protocol)):
        per, flush = replay(accesses, capacity / plan.ratio, n_k, gpu.dram_latency_s, protocol,
                            gpu.dram_bandwidth_bytes_per_s)
        by_protocol[protocol] = _scale(infos, per, flush)
    del accesses
    _, _, _, mems, flush_bytes, _ = by_protocol[l2_protocol]
    miss, tail_miss, dram_scale, _, _, l2_queue = by_protocol[time_protocol]

    # pass 2: the same dispatch with the L2's miss ratios and DRAM bytes
    timeline, spans, _ = _dispatch_all(schedule, gpu, infos, miss, dram_scale, characterizers,
                                       lambda ki, cta=0: False,
                                       cold_start=time_protocol == "ncu", tail_miss=tail_miss,
                                       l2_queue=l2_queue)
    kernels = [kernel_result(k, gpu, i["rates"], s, e, occ, m, i["totals"],
                             tensor_server_busy_s(k, c.mma, rates.tensor_flops_per_s))
               for k, (s, e, occ), m, i, c in zip(schedule.kernels, spans, mems, infos,
                                                  characterizers)]
    total = {"dram_read_bytes": sum(m["dram_read_bytes"] for m in mems),
             "dram_write_bytes": sum(m["dram_write_bytes"] for m in mems),
             "dram_write_flush_bytes": flush_bytes,
             "load_hit_bytes": sum(m["load_hit_bytes"] for m in mems),
             "load_miss_bytes": sum(m["load_miss_bytes"] for m in mems)}
    model = {"l2_effective_fraction": l2_effective_fraction,
             "l2_effective_capacity_bytes": capacity,
             "l2_policy": "tile-level fully associative LRU, write-allocate, write-back",
             "l2_protocol": l2_protocol,
             **({"time_protocol": time_protocol} if time_protocol != l2_protocol else {}),
             **sampling,
             "micro_simulations": sum(c.simulations for c in characterizers),
             "cta_classes": [len(i["classes"].reps) for i in infos]}
    return schedule_result("fast", schedule, gpu, kernels, total, timeline, model)
