"""How one CTA runs its program: the pipeline interpretations of issue 3, as SimPy generators.

The same code runs in exact mode (every CTA, every tile, the tile LRU behind `ctx.mem`) and in
the fast mode's micro-simulations (a few CTAs of one SM, expected memory behind `ctx.mem`).

- Plain ops run in order. Consecutive loads are issued together and waited for once (a warp
  issues independent loads back to back). A store waits until L2 has accepted its bytes.
  Mma / Exp / Alu wait in the FIFO queue of their SM unit, then execute.
- An innermost Loop that loads tiles is *buffered* with `Pipeline.stages` slots: at the start
  of iteration j the loads of iteration j + stages − 1 are issued (its slot was freed by
  iteration j − 1), then the CTA waits for iteration j's tiles and computes. stages = 1 is the
  synchronous load → wait → compute loop; stages ≥ 2 is cp.async multi-stage buffering.
- With `warp_specialized`, such a loop has a producer (TMA) that refills a slot as soon as
  every consumer warpgroup has finished the iteration that held it, and
  `consumer_warpgroups` consumers that each run 1/W of every Mma/Exp/Alu of the iteration
  (one row slab each) on the shared SM units, so one consumer's softmax runs while another's
  GEMMs hold the tensor cores (ping-pong). With `intra_overlap`, a consumer whose iteration is
  [GEMM0, softmax, GEMM1...] issues GEMM0 of iteration j+1 asynchronously before the softmax
  of iteration j, and waits for it only after GEMM1 of iteration j.
- Loops without loads, or with nested loops, run their iterations one after another.

Stall accounting (`ctx.stall`, seconds the CTA's first thread was blocked): [memory, tensor
queue, exp queue, ALU queue]. An asynchronous GEMM the consumer had to wait for at the end of
an iteration counts as tensor stall.
"""
from __future__ import annotations

from ..schedule import Loop

MEM, TENSOR, EXP, ALU = 0, 1, 2, 3
_STALL_SLOT = {"mma": TENSOR, "exp": EXP, "alu": ALU}


class CtaContext:
    """What a running CTA can reach: the clock, its SM's units, memory, its kernel's pipeline."""

    __slots__ = ("env", "units", "mem", "pipe", "stall")

    def __init__(self, env, units, mem, pipe):
        self.env, self.units, self.mem, self.pipe = env, units, mem, pipe
        self.stall = [0.0, 0.0, 0.0, 0.0]


def tile_key(op, env_vars: dict) -> tuple:
    """(tensor, *coord) with loop variables bound: the L2 tag of a tile."""
    return (op.tensor,) + tuple(env_vars[c] if isinstance(c, str) else c for c in op.coord)


def _work(op) -> float:
    return op.flops if op.kind == "mma" else op.count


_BODY_CACHE: dict = {}


def _split_body(body: tuple):
    """(loads, other ops, is_innermost) of a loop body, cached by body."""
    hit = _BODY_CACHE.get(body)
    if hit is None:
        innermost = not any(isinstance(i, Loop) for i in body)
        loads = tuple(i for i in body if getattr(i, "kind", "") == "load")
        rest = tuple(i for i in body if getattr(i, "kind", "") != "load")
        hit = _BODY_CACHE[body] = (loads, rest, innermost)
        if len(_BODY_CACHE) > 4096:
            _BODY_CACHE.clear()
    return hit


def run_program(ctx: CtaContext, items: tuple, env_vars: dict):
    """Run a program (or a loop body with nested loops) in order."""
    plain = []
    for item in items:
        if isinstance(item, Loop):
            if plain:
                yield from run_ops(ctx, plain, env_vars, 1.0, ctx.stall, True)
                plain = []
            yield from run_loop(ctx, item, env_vars)
        else:
            plain.append(item)
    if plain:
        yield from run_ops(ctx, plain, env_vars, 1.0, ctx.stall, True)


def run_ops(ctx: CtaContext, ops, env_vars: dict, share: float, stall: list, do_memory: bool):
    """Plain ops in order. `share`: the fraction of each Mma/Exp/Alu this thread executes;
    `do_memory`: whether this thread issues the loads and stores (consumer 0 of a split)."""
    env, mem, units = ctx.env, ctx.mem, ctx.units
    pending_s = -1.0                          # loads issued, not yet waited for
    for op in ops:
        kind = op.kind
        if kind == "load":
            if do_memory:
                r = mem.load(tile_key(op, env_vars), op.tensor, op.bytes, env.now)
                if r > pending_s:
                    pending_s = r
            continue
        if pending_s > env.now:
            stall[MEM] += pending_s - env.now
            yield env.timeout(pending_s - env.now)
        pending_s = -1.0
        if kind == "store":
            if do_memory:
                t = mem.store(tile_key(op, env_vars), op.tensor, op.bytes, op.reduce, env.now)
                if t > env.now:
                    stall[MEM] += t - env.now
                    yield env.timeout(t - env.now)
        elif kind in _STALL_SLOT:
            server = units.tensor if kind == "mma" else units.exp if kind == "exp" else units.alu
            now = env.now
            start, finish = server.reserve(now, _work(op) * share)
            stall[_STALL_SLOT[kind]] += start - now
            yield env.timeout(finish - now)
        # barriers cost nothing beyond the ordering they already impose here
    if pending_s > env.now:
        stall[MEM] += pending_s - env.now
        yield env.timeout(pending_s - env.now)


def run_loop(ctx: CtaContext, loop: Loop, env_vars: dict):
    loads, rest, innermost = _split_body(loop.body)
    if not innermost or not loads:
        for v in range(loop.start, loop.start + loop.count):
            env_vars[loop.var] = v
            if innermost:
                yield from run_ops(ctx, loop.body, env_vars, 1.0, ctx.stall, True)
            else:
                yield from run_program(ctx, loop.body, env_vars)
        env_vars.pop(loop.var, None)
    elif ctx.pipe.warp_specialized:
        yield from _run_warp_specialized(ctx, loop, loads, rest, env_vars)
    else:
        yield from _run_buffered(ctx, loop, loads, rest, env_vars)
        env_vars.pop(loop.var, None)


def _issue(ctx, loads, env_vars: dict) -> float:
    """Issue an iteration's loads now; when are all its tiles in shared memory."""
    now = ctx.env.now
    ready = now
    for ld in loads:
        r = ctx.mem.load(tile_key(ld, env_vars), ld.tensor, ld.bytes, now)
        if r > ready:
            ready = r
    return ready


def _run_buffered(ctx, loop: Loop, loads, rest, env_vars: dict):
    env, var, start, n = ctx.env, loop.var, loop.start, loop.count
    stages = max(1, ctx.pipe.stages)
    ring = [0.0] * stages                     # slot j % stages: when iteration j's tiles land
    for j in range(min(stages - 1, n)):
        env_vars[var] = start + j
        ring[j % stages] = _issue(ctx, loads, env_vars)
    for j in range(n):
        if j + stages - 1 < n:                # slot of iteration j − 1 is free again
            env_vars[var] = start + j + stages - 1
            ring[(j + stages - 1) % stages] = _issue(ctx, loads, env_vars)
        ready = ring[j % stages]
        if ready > env.now:
            ctx.stall[MEM] += ready - env.now
            yield env.timeout(ready - env.now)
        env_vars[var] = start + j
        yield from run_ops(ctx, rest, env_vars, 1.0, ctx.stall, True)


def _overlap_split(rest):
    """(GEMM0, softmax..., rest) when the body is Mma+, (Exp|Alu)+, then an Mma; else None."""
    i = 0
    while i < len(rest) and rest[i].kind == "mma":
        i += 1
    j = i
    while j < len(rest) and rest[j].kind in ("exp", "alu", "barrier"):
        j += 1
    if i == 0 or j == i or j >= len(rest) or rest[j].kind != "mma":
        return None
    return rest[:i], rest[i:]


def _run_warp_specialized(ctx, loop: Loop, loads, rest, env_vars: dict):
    env, pipe = ctx.env, ctx.pipe
    var, start, n = loop.var, loop.start, loop.count
    n_consumers = max(1, pipe.consumer_warpgroups)
    stages = max(1, pipe.stages)
    share = 1.0 / n_consumers
    ready: dict = {}        # iteration → when its tiles are in shared memory
    waiting: dict = {}      # iteration → event for consumers that got ahead of the producer
    remaining: dict = {}    # iteration → consumers still working on it
    producer_vars = dict(env_vars)

    def issue(j: int) -> None:                # the producer's TMA copies into a free slot
        producer_vars[var] = start + j
        ready[j] = _issue(ctx, loads, producer_vars)
        ev = waiting.pop(j, None)
        if ev is not None:
            ev.succeed()

    def finish(j: int) -> None:               # a consumer releases iteration j's slot
        left = remaining.get(j, n_consumers) - 1
        if left:
            remaining[j] = left
            return
        remaining.pop(j, None)
        ready.pop(j, None)
        if j + stages < n:
            issue(j + stages)

    def wait_data(j: int, stall: list):
        if j not in ready:
            ev = waiting.get(j)
            if ev is None:
                ev = waiting[j] = env.event()
            t0 = env.now
            yield ev
            stall[MEM] += env.now - t0
        r = ready[j]
        if r > env.now:
            stall[MEM] += r - env.now
            yield env.timeout(r - env.now)

    split = _overlap_split(rest) if pipe.intra_overlap else None

    def consumer(c: int):
        stall = ctx.stall if c == 0 else [0.0, 0.0, 0.0, 0.0]
        my_vars = dict(env_vars)
        if split is None:
            for j in range(n):
                yield from wait_data(j, stall)
                my_vars[var] = start + j
                yield from run_ops(ctx, rest, my_vars, share, stall, c == 0)
                finish(j)
            return
        gemm0, after = split
        gemm0_work = sum(_work(op) for op in gemm0) * share
        tensor = ctx.units.tensor
        yield from wait_data(0, stall)
        now = env.now
        s, f = tensor.reserve(now, gemm0_work)
        stall[TENSOR] += s - now
        yield env.timeout(f - now)
        for j in range(n):
            next_done = None
            if j + 1 < n:                      # GEMM0 of j+1 runs under softmax of j
                yield from wait_data(j + 1, stall)
                _, next_done = tensor.reserve(env.now, gemm0_work)
            my_vars[var] = start + j
            yield from run_ops(ctx, after, my_vars, share, stall, c == 0)
            finish(j)
            if next_done is not None and next_done > env.now:
                stall[TENSOR] += next_done - env.now
                yield env.timeout(next_done - env.now)

    for j in range(min(stages, n)):
        issue(j)
    procs = [env.process(consumer(c)) for c in range(n_consumers)]
    for p in procs:
        yield p
