"""How one CTA runs its program: the pipeline interpretations of issue 3, as SimPy generators.

The same code runs in exact mode (every CTA, every tile, the tile LRU behind `ctx.mem`) and in
the fast mode's micro-simulations (a few CTAs of one SM, expected memory behind `ctx.mem`).

- Plain ops run in order. Consecutive loads are issued together and waited for once (a warp
  issues independent loads back to back); an `indirect` load (a block table) is waited for by
  the issuing thread before the loads after it are issued, since they take their addresses
  from it. A store waits until L2 has accepted its bytes. Where the kernel's threads issue
  their copies themselves at a measured cost (ctx.copy_s_per_byte > 0), issuing loads holds
  the thread for bytes × that cost (the requests go out at its start): issue time is not
  compute time, and no compute of this thread runs under it (issue stall, counted as memory).
  Mma / Exp / Alu wait in the FIFO queue of their SM unit, then execute.
- An innermost Loop that loads tiles is *buffered* with `Pipeline.stages` slots: at the start
  of iteration j the loads of iteration j + stages − 1 are issued (its slot was freed by
  iteration j − 1), then the CTA waits for iteration j's tiles and computes. stages = 1 is the
  synchronous load → wait → compute loop; stages ≥ 2 is cp.async multi-stage buffering.
- With `warp_specialized`, such a loop has a producer (TMA) that refills a slot as soon as
  every consumer warpgroup has finished the iteration that held it, and
  `consumer_warpgroups` consumers that each run 1/W of every Mma/Exp/Alu of the iteration
  (one row slab each) on the shared SM units, so one consumer's softmax runs while another's
  GEMMs hold the tensor cores (ping-pong); the consumers issue their GEMM groups in turn,
  consumer 0 first (_Turns: FA-3's named barriers). With `intra_overlap`, a consumer whose
  iteration is [GEMM0, softmax, GEMM1] issues GEMM0 of iteration j with GEMM1 of iteration
  j − 1, waits for GEMM0, runs the softmax of iteration j (up to its last Exp) while that
  GEMM1 runs, waits for it, then runs the rest (the O rescale, P's conversion); the last
  GEMM1 after the loop (fa3_fwd.cu, flash-attention's IntraWGOverlap mainloop). The
  iteration's first load (K, read by GEMM0) then has a ring of its own, released after
  GEMM0 (FA-3's separate K and V pipelines).
- Loops without loads, or with nested loops, run their iterations one after another.

Stall accounting (`ctx.stall`, seconds the CTA's first thread was blocked): [memory, tensor
queue, exp queue, ALU queue]. An asynchronous GEMM the consumer had to wait for at the end of
an iteration counts as tensor stall.
"""
from __future__ import annotations

from ..schedule import Loop
from .memory import Server

MEM, TENSOR, EXP, ALU = 0, 1, 2, 3
# the elementwise ops of a KV step (fa2.kv_iteration's names: the row max, scale and sum, the
# exps, P's conversion, O's rescale) that a consumer warpgroup of a warp-specialized wgmma loop
# runs as one softmax tile on its SM's compute.SoftmaxTileServer (the H200 probe's tile is
# made of exactly these); its other elementwise ops (a mask) stay on the FIFO units
SOFTMAX_TILE_OPS = frozenset({"softmax", "exp", "pack P", "rescale"})
_STALL_SLOT = {"mma": TENSOR, "exp": EXP, "alu": ALU}


class CtaContext:
    """What a running CTA can reach: the clock, its SM's units, memory, its kernel's pipeline,
    the cost of its Mma ops on the tensor server (compute.MmaCost; None: FLOPs), and the
    seconds its threads spend issuing a byte of their loads (machine.copy_issue_s_per_byte)."""

    __slots__ = ("env", "units", "mem", "pipe", "stall", "mma", "copy_s_per_byte",
                 "store_s_per_byte", "fragment_store_s_per_byte", "cycle_s", "prologue_ready_s",
                 "epilogue")

    def __init__(self, env, units, mem, pipe, mma=None, copy_s_per_byte: float = 0.0,
                 store_s_per_byte: float = 0.0, fragment_store_s_per_byte: float = 0.0,
                 cycle_s: float = 0.0, epilogue: tuple = (0.0, 1.0)):
        self.env, self.units, self.mem, self.pipe = env, units, mem, pipe
        self.stall = [0.0, 0.0, 0.0, 0.0]
        self.mma = mma
        self.copy_s_per_byte = copy_s_per_byte
        self.store_s_per_byte = store_s_per_byte      # machine.store_issue_s_per_byte
        # machine.fragment_store_issue_s_per_byte (Store.layout "fragment")
        self.fragment_store_s_per_byte = fragment_store_s_per_byte
        # seconds per clock cycle of the SM (Barrier.cycles; 0: barriers cost nothing)
        self.cycle_s = cycle_s
        # loads issued just before a warp-specialized loop and not yet waited for
        # (issue_prologue_with_loop): when they have landed
        self.prologue_ready_s = -1.0
        # (machine.tma_epilogue_s_per_byte, tma_epilogue_serial_fraction) of Store.tma_epilogue
        self.epilogue = epilogue


def tile_key(op, env_vars: dict) -> tuple:
    """(tensor, *coord) with loop variables bound: the L2 tag of a tile."""
    return (op.tensor,) + tuple(env_vars[c] if isinstance(c, str) else c for c in op.coord)


def load_tile(mem, op, key, now_s: float) -> float:
    """Issue a Load on `mem`; when its tile is in shared memory. A load read in dependent
    round trips (Load.round_trips) takes at least that many trip latencies."""
    trips = op.round_trips
    floor_s = now_s + trips * mem.trip_latency_s(key, op.tensor, now_s) if trips > 1 else 0.0
    r = mem.load(key, op.tensor, op.bytes, now_s, op.oob_bytes, op.line_misaligned,
                 op.multicast)
    return r if r >= floor_s else floor_s


def _work(op, mma=None) -> float:
    if op.kind == "mma":
        return op.flops if mma is None else mma.work(op)
    return op.issued if op.kind == "alu" else op.count


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
            lead = _leading_barriers(plain)
            if lead and issue_prologue_with_loop(ctx, plain[lead:], item):
                # the CTA's own setup (a measured Barrier) comes before the producer's first copy
                yield from run_ops(ctx, plain[:lead], env_vars, 1.0, ctx.stall, True)
                plain = plain[lead:]
            if plain and issue_prologue_with_loop(ctx, plain, item):
                # the producer issues them and the loop's first tiles back to back
                ctx.prologue_ready_s = max(ctx.prologue_ready_s, _issue(ctx, plain, env_vars))
                plain = []
            if plain:
                yield from run_ops(ctx, plain, env_vars, 1.0, ctx.stall, True)
                plain = []
            yield from run_loop(ctx, item, env_vars)
        else:
            plain.append(item)
    if plain:
        yield from run_ops(ctx, plain, env_vars, 1.0, ctx.stall, True)


def run_ops(ctx: CtaContext, ops, env_vars: dict, share: float, stall: list, do_memory: bool,
            stream=None):
    """Plain ops in order. `share`: the fraction of each Mma/Exp/Alu this thread executes;
    `do_memory`: whether this thread issues the loads and stores (consumer 0 of a split);
    `stream`: this consumer warpgroup's own wgmma stream (a Server), or None."""
    env, mem = ctx.env, ctx.mem
    pending_s = -1.0                          # loads issued, not yet waited for
    for op in ops:
        kind = op.kind
        if kind == "load":
            if do_memory:
                r = load_tile(mem, op, tile_key(op, env_vars), env.now)
                if r > pending_s:
                    pending_s = r
                if op.indirect and r > env.now:     # later loads need its data as addresses
                    stall[MEM] += r - env.now
                    yield env.timeout(r - env.now)
                if ctx.copy_s_per_byte:             # the thread issues the copies itself
                    yield from _copy_issue(ctx, op.bytes * ctx.copy_s_per_byte, stall)
            continue
        if pending_s > env.now:
            stall[MEM] += pending_s - env.now
            yield env.timeout(pending_s - env.now)
        pending_s = -1.0
        if kind == "store":
            yield from _run_store(ctx, op, env_vars, share, stall, do_memory)
        elif stream is not None and op.name in SOFTMAX_TILE_OPS and kind != "mma":
            yield from _softmax_tile_op(ctx, op, share, stall)
        elif kind in _STALL_SLOT:
            yield from _run_unit_op(ctx, op, share, stall, stream)
        elif kind == "barrier" and op.cycles and ctx.cycle_s:
            # a measured wait / latency chain of the kernel (Barrier.cycles): its threads
            # are blocked, no unit is busy (other resident CTAs' work is not held)
            yield env.timeout(op.cycles * ctx.cycle_s)
        # other barriers cost nothing beyond the ordering they already impose here
    if pending_s > env.now:
        stall[MEM] += pending_s - env.now
        yield env.timeout(pending_s - env.now)


def _run_store(ctx: CtaContext, op, env_vars: dict, share: float, stall: list,
               do_memory: bool):
    """A Store: the threads' own issue where they write it (thread-issued or fragment-layout
    stores), the SM's epilogue path for a TMA epilogue, then the memory's acceptance (and a
    reduce store's hold of the MMA stream)."""
    env, mem, units = ctx.env, ctx.mem, ctx.units
    if do_memory and op.thread_issued and ctx.store_s_per_byte:
        # the threads write the tile from registers themselves (Store.thread_issued)
        yield from _copy_issue(ctx, op.bytes * ctx.store_s_per_byte, stall)
    elif (do_memory and op.layout == "fragment" and not op.reduce
          and not op.thread_issued and ctx.fragment_store_s_per_byte):
        # issuing stores in the fragment layout (Store.layout) holds the threads
        # (a thread_issued store is charged by its kernel's own traced figure only)
        yield from _copy_issue(ctx, op.bytes * ctx.fragment_store_s_per_byte, stall)
    held_s = 0.0
    if do_memory and op.tma_epilogue and ctx.epilogue[0]:
        # the SM's epilogue path: this tile's starts when the previous one has
        # drained; its warps are held for the serial part (machine.tma_epilogue_*)
        start, finish = units.epilogue.reserve(env.now, op.bytes * ctx.epilogue[0])
        if start > env.now:
            stall[MEM] += start - env.now
            yield env.timeout(start - env.now)
        held_s = start + ctx.epilogue[1] * (finish - start)
    if do_memory:
        t = mem.store(tile_key(op, env_vars), op.tensor, op.bytes,
                      op.reduce and op.reduce_layout, env.now, op.layout,
                      op.partial_sectors, op.line_misaligned)
        if op.reduce and ctx.mma is not None and ctx.mma.reduce_work_per_byte:
            _s, f2 = units.tensor.reserve(env.now, ctx.mma.reduce_hold(op.bytes * share, op.reduce_layout))
            t = max(t, f2)
        t = max(t, held_s)
        if t > env.now:
            stall[MEM] += t - env.now
            yield env.timeout(t - env.now)


def _run_unit_op(ctx: CtaContext, op, share: float, stall: list, stream):
    """An Mma, Exp or Alu on its SM server, with what it holds of the MMA stream (issue-slot
    sharing, measured phases and barriers) and, for a wgmma consumer, its own stream."""
    env, units, kind = ctx.env, ctx.units, op.kind
    server = units.tensor if kind == "mma" else units.exp if kind == "exp" else units.alu
    now = env.now
    start, finish = server.reserve(now, _work(op, ctx.mma) * share)
    if kind == "alu" and op.lone_cycles and ctx.cycle_s:
        # its warps issue no faster than alone on their sub-partitions (Alu.lone_cycles)
        finish = max(finish, now + op.lone_cycles * share * ctx.cycle_s)
    if stream is not None and kind == "mma":
        # one warpgroup's wgmma group: its latency and its work (machine.MmaCost.stream_work)
        finish = max(finish, stream.reserve(now, ctx.mma.stream_work(op, share))[1])
        units.note_wgmma(stream, finish)
    if kind != "mma" and ctx.mma is not None:
        # issue-slot sharing (machine.MmaCost.elementwise_hold): the same warps'
        # MMA stream pauses while they issue elementwise instructions; a measured
        # phase (Alu.phase_cycles_per_op) holds the threads for its time and the
        # stream for its exposed part (MmaCost.alu_hold)
        if kind == "alu":
            hold = ctx.mma.alu_hold(op, op.count * share)
            phase = ctx.mma.phase_s(op, op.count * share)
            if phase:
                finish = max(finish, now + phase)
            bar = ctx.mma.barrier_s(op)    # Alu.barrier_cycles: the wait after it
            if bar:
                finish += bar
        else:
            hold = ctx.mma.elementwise_hold(kind, op.count * share)
        if hold:
            _s, f2 = units.tensor.reserve(now, hold)
            if stream is None:
                # the same warps issue the MMAs (mma.sync) and wait for them; a wgmma
                # consumer's MMAs run asynchronously: its hold delays them, not it
                finish = max(finish, f2)
    stall[_STALL_SLOT[kind]] += start - now
    yield env.timeout(finish - now)


def _softmax_tile_op(ctx: CtaContext, op, share: float, stall: list):
    """One of a consumer warpgroup's softmax-tile ops (SOFTMAX_TILE_OPS; a warp-specialized
    wgmma loop) on its SM's compute.SoftmaxTileServer: its count at the probe's lone-warpgroup
    cycles per op, the consumers in their tiles at once and the SM's busy wgmma streams slowing
    it as measured (slower on an SM whose SFU is slower than the probe's: SoftmaxTileServer.
    sfu_scale). Its issue slots still hold the SM's MMA stream (machine.MmaCost.
    elementwise_hold), which delays the MMAs, not this warpgroup (its wgmma are asynchronous);
    a measured phase (Alu.phase_cycles_per_op) is a floor and a measured barrier follows."""
    env, mma = ctx.env, ctx.mma
    kind, now = op.kind, env.now
    tiles = ctx.units.softmax_tiles(env)
    amount = op.count * share * tiles.cycles_per_op * ctx.cycle_s * tiles.sfu_scale(
        ctx.units.exp.rate * ctx.cycle_s)
    finish = now
    if mma is not None:
        if kind == "alu":
            hold = mma.alu_hold(op, op.count * share)
            phase = mma.phase_s(op, op.count * share)
            if phase:
                finish = max(finish, now + phase)
        else:
            hold = mma.elementwise_hold(kind, op.count * share)
        if hold:
            ctx.units.tensor.reserve(now, hold)
    yield tiles.request(amount)
    stall[_STALL_SLOT[kind]] += max(0.0, env.now - now - amount)
    finish = max(finish, env.now)
    if mma is not None and kind == "alu":
        finish += mma.barrier_s(op)
    if finish > env.now:
        yield env.timeout(finish - env.now)


def run_loop(ctx: CtaContext, loop: Loop, env_vars: dict):
    loads, rest, innermost = _split_body(loop.body)
    if not innermost or not loads:
        for v in loop.values():
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


def _leading_barriers(plain: list) -> int:
    """How many ops at the start of `plain` are barriers."""
    n = 0
    while n < len(plain) and plain[n].kind == "barrier":
        n += 1
    return n


def issue_prologue_with_loop(ctx, plain, loop: Loop) -> bool:
    """Whether the plain ops before `loop` are loads that its producer issues together with
    the loop's first tiles: a warp-specialized loop whose body loads (the TMA producer of
    fa3_fwd.cu and FA-3 issues Q_i, K_0, V_0 back to back, `load_q(); load_kv(0); ...`, and the
    consumers wait for Q on its own mbarrier before their first GEMM). Otherwise the loads are
    waited for before the loop starts (a thread that issues and then waits)."""
    if not ctx.pipe.warp_specialized or not all(op.kind == "load" and not op.indirect
                                                for op in plain):
        return False
    loads, _rest, innermost = _split_body(loop.body)
    return bool(innermost and loads)


def _issue(ctx, loads, env_vars: dict) -> float:
    """Issue an iteration's loads now; when are all its tiles in shared memory."""
    now = ctx.env.now
    ready = now
    for ld in loads:
        r = load_tile(ctx.mem, ld, tile_key(ld, env_vars), now)
        if r > ready:
            ready = r
    return ready


def _issue_indirect(ctx, loads, env_vars: dict):
    """`_issue` for an iteration with indirect loads: the issuing thread waits for each
    indirect load to land before it issues the loads after it (their addresses)."""
    env = ctx.env
    ready = env.now
    for ld in loads:
        r = load_tile(ctx.mem, ld, tile_key(ld, env_vars), env.now)
        if r > ready:
            ready = r
        if ld.indirect and r > env.now:
            ctx.stall[MEM] += r - env.now
            yield env.timeout(r - env.now)
    return ready


def issue_lead(stages: int) -> int:
    """How many iterations before its use a buffered loop issues an iteration's loads: with
    `stages` shared-memory slots, iteration j + stages − 1 is issued at the start of
    iteration j (its slot was freed by iteration j − 1), so the loop's first `stages`
    iterations are issued before iteration 0 computes. The exact engine's loops, the L2
    replay's placement of loads and the first wave's prologue all use this."""
    return max(1, stages) - 1


def _copy_issue(ctx, issue_s: float, stall: list):
    """The CTA's threads issue copies for issue_s (machine.copy_issue_s_per_byte); being its
    MMA warps, they hold the SM's MMA stream meanwhile for the exposed fraction of that time
    (machine.MmaCost.copy_hold; nothing where the GPU has no measured fraction). The thread
    does not wait for the hold: it is MMA throughput the other resident CTAs lose."""
    if ctx.mma is not None:
        hold = ctx.mma.copy_hold(issue_s)
        if hold:
            ctx.units.tensor.reserve(ctx.env.now, hold)
    stall[MEM] += issue_s
    yield ctx.env.timeout(issue_s)


def _run_buffered(ctx, loop: Loop, loads, rest, env_vars: dict):
    env, var, n, value = ctx.env, loop.var, loop.count, loop.value
    lead = issue_lead(ctx.pipe.stages)
    stages = lead + 1
    ring = [0.0] * stages                     # slot j % stages: when iteration j's tiles land
    indirect = any(ld.indirect for ld in loads)
    issue_s = sum(ld.bytes for ld in loads) * ctx.copy_s_per_byte   # the threads' copy issue
    for j in range(min(lead, n)):
        env_vars[var] = value(j)
        ring[j % stages] = ((yield from _issue_indirect(ctx, loads, env_vars)) if indirect
                            else _issue(ctx, loads, env_vars))
        if issue_s:
            yield from _copy_issue(ctx, issue_s, ctx.stall)
    for j in range(n):
        if j + lead < n:                      # slot of iteration j − 1 is free again
            env_vars[var] = value(j + lead)
            ring[(j + lead) % stages] = ((yield from _issue_indirect(ctx, loads, env_vars)) if indirect
                                         else _issue(ctx, loads, env_vars))
            if issue_s:
                yield from _copy_issue(ctx, issue_s, ctx.stall)
        ready = ring[j % stages]
        if ready > env.now:
            ctx.stall[MEM] += ready - env.now
            yield env.timeout(ready - env.now)
        env_vars[var] = value(j)
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


def _softmax_split(after):
    """(softmax, post, GEMM1) of an overlap split's second part: the elementwise ops up to the
    last Exp (mask, max, exp, sum: the softmax the kernel runs under the previous P·V), those
    after it (the O rescale and the P conversion, run once that P·V is done), and the Mma(s)
    from the first Mma on."""
    k = next(i for i, op in enumerate(after) if op.kind == "mma")
    exps = [i for i in range(k) if after[i].kind == "exp"]
    cut = exps[-1] + 1 if exps else k
    return after[:cut], after[cut:k], after[k:]


class _Turns:
    """FA-3's ping-pong: the consumer warpgroups of a CTA issue their GEMM groups in turn,
    consumer 0 first, then 1, ... (each waits at a named barrier for the previous one's
    arrive after its issue: fa3_fwd.cu's pp_sync / pp_arrive, flash-attention's
    warp_scheduler_barrier). A consumer whose softmax is late holds up the ones behind it."""

    def __init__(self, env, consumers: int):
        self.env, self.consumers, self.turn, self.waiting = env, consumers, 0, {}

    def wait(self, c: int, stall: list):
        start = self.env.now
        while self.turn % self.consumers != c:
            ev = self.waiting.get(c)
            if ev is None:
                ev = self.waiting[c] = self.env.event()
            yield ev
        stall[TENSOR] += self.env.now - start

    def pass_on(self) -> None:
        self.turn += 1
        ev = self.waiting.pop(self.turn % self.consumers, None)
        if ev is not None:
            ev.succeed()


class _Ring:
    """One circular buffer of a warp-specialized loop: `stages` slots of some of the
    iteration's tiles, refilled by the producer when every consumer has released a slot."""

    def __init__(self, ctx, loads, var, value, n, stages, consumers, env_vars):
        self.ctx, self.loads, self.var, self.value, self.n = ctx, loads, var, value, n
        self.stages, self.consumers = stages, consumers
        self.ready: dict = {}       # iteration → when its tiles are in shared memory
        self.waiting: dict = {}     # iteration → event for consumers ahead of the producer
        self.remaining: dict = {}   # iteration → consumers still holding its slot
        self.vars = dict(env_vars)
        for j in range(min(stages, n)):
            self.issue(j)

    def issue(self, j: int) -> None:          # the producer's TMA copies into a free slot
        self.vars[self.var] = self.value(j)
        self.ready[j] = _issue(self.ctx, self.loads, self.vars) if self.loads else self.ctx.env.now
        ev = self.waiting.pop(j, None)
        if ev is not None:
            ev.succeed()

    def release(self, j: int) -> None:        # a consumer is done with iteration j's slot
        left = self.remaining.get(j, self.consumers) - 1
        if left:
            self.remaining[j] = left
            return
        self.remaining.pop(j, None)
        self.ready.pop(j, None)
        if j + self.stages < self.n:
            self.issue(j + self.stages)

    def wait(self, j: int, stall: list):
        env = self.ctx.env
        if j not in self.ready:
            ev = self.waiting.get(j)
            if ev is None:
                ev = self.waiting[j] = env.event()
            t0 = env.now
            yield ev
            stall[MEM] += env.now - t0
        r = self.ready[j]
        if r > env.now:
            stall[MEM] += r - env.now
            yield env.timeout(r - env.now)


class _Consumers:
    """The consumer warpgroups of one warp-specialized loop: each runs 1/W of every op of the
    iteration (`share`) on the SM's shared units and its own wgmma stream, issuing its GEMM
    groups in turn with the others (_Turns)."""

    def __init__(self, ctx, loop: Loop, rest, env_vars: dict, split, together: bool,
                 n_consumers: int):
        self.ctx, self.rest, self.env_vars, self.split = ctx, rest, env_vars, split
        self.var, self.value, self.n = loop.var, loop.value, loop.count
        self.together, self.share = together, 1.0 / n_consumers
        # each consumer warpgroup's own wgmma stream: its groups at the SM's rate, each plus
        # machine.wgmma_group_latency_cycles
        self.streams = ([Server(ctx.units.tensor.rate) for _ in range(n_consumers)]
                        if ctx.mma is not None and not ctx.mma.sync else [None] * n_consumers)
        self.turns = _Turns(ctx.env, n_consumers)
        pipe = ctx.pipe
        # the kernel's measured per-step costs (Pipeline.consumer_step_overhead_cycles,
        # rescale_phase_cycles; 0 where not measured), in seconds
        self.overhead_s = getattr(pipe, "consumer_step_overhead_cycles", 0.0) * ctx.cycle_s
        self.rescale_s = getattr(pipe, "rescale_phase_cycles", 0.0) * ctx.cycle_s

    def _stall(self, c: int) -> list:
        return self.ctx.stall if c == 0 else [0.0, 0.0, 0.0, 0.0]

    def gemm_work(self, ops, c: int) -> tuple:
        """(SM tensor work, the consumer's own stream work) of a GEMM group's ops: each op one
        wgmma group of the consumer's share, its latency included (machine.MmaCost.stream_work)."""
        mma = self.ctx.mma
        w = sum(_work(op, mma) for op in ops) * self.share
        ws = (sum(mma.stream_work(op, self.share) for op in ops)
              if self.streams[c] is not None else 0.0)
        return w, ws

    def issue_in_turn(self, c: int, works, stall: list):
        """Wait for the consumer's turn, issue the GEMMs (in order on the SM's tensor server
        and the consumer's stream), pass the turn on; their finish times."""
        yield from self.turns.wait(c, stall)
        if self.overhead_s:
            # the step's waits that do not block (the K / V full barriers, the ping-pong's
            # named barrier) and the wgmma fence cost their measured cycles, in turn
            yield self.ctx.env.timeout(self.overhead_s)
        now, done, stream = self.ctx.env.now, [], self.streams[c]
        for w, ws in works:
            f = self.ctx.units.tensor.reserve(now, w)[1]
            if stream is not None:
                f = max(f, stream.reserve(now, ws)[1])
            done.append(f)
        if stream is not None and done:
            self.ctx.units.note_wgmma(stream, max(done))
        self.turns.pass_on()
        return done

    def post(self, ops, my_vars: dict, c: int, stall: list):
        """The ops after the softmax (O's rescale, P's conversion), at least the kernel's
        measured phase for them (Pipeline.rescale_phase_cycles)."""
        env = self.ctx.env
        t0 = env.now
        yield from run_ops(self.ctx, ops, my_vars, self.share, stall, c == 0, self.streams[c])
        if self.rescale_s and env.now < t0 + self.rescale_s:
            yield env.timeout(t0 + self.rescale_s - env.now)

    def wait_until(self, t: float, stall: list):
        env = self.ctx.env
        if t > env.now:
            stall[TENSOR] += t - env.now
            yield env.timeout(t - env.now)

    def plain(self, c: int, all_tiles: _Ring):
        """No split: the whole iteration's ops in order, one ring for every tile."""
        stall, my_vars = self._stall(c), dict(self.env_vars)
        for j in range(self.n):
            yield from all_tiles.wait(j, stall)
            my_vars[self.var] = self.value(j)
            yield from run_ops(self.ctx, self.rest, my_vars, self.share, stall, c == 0,
                               self.streams[c])
            all_tiles.release(j)

    def plain_split(self, c: int, first: _Ring, others: _Ring):
        """No intra overlap, K and V in rings of their own: S_j issued (in turn), waited for,
        K's slot released; softmax_j, the O rescale and P_j; P_j V_j issued (in turn),
        waited for, V's slot released (fa3_fwd.cu without FA3_INTRA_OVERLAP)."""
        stall, my_vars = self._stall(c), dict(self.env_vars)
        gemm0, after = self.split
        soft, post, gemm1 = _softmax_split(after)
        w0, w1 = self.gemm_work(gemm0, c), self.gemm_work(gemm1, c)
        for j in range(self.n):
            yield from first.wait(j, stall)
            my_vars[self.var] = self.value(j)
            done = yield from self.issue_in_turn(c, (w0,), stall)
            yield from self.wait_until(done[0], stall)
            first.release(j)
            yield from run_ops(self.ctx, soft, my_vars, self.share, stall, c == 0, self.streams[c])
            yield from self.post(post, my_vars, c, stall)
            yield from others.wait(j, stall)
            done = yield from self.issue_in_turn(c, (w1,), stall)
            yield from self.wait_until(done[0], stall)
            others.release(j)

    def overlap(self, c: int, first: _Ring, others: _Ring):
        """FA-3's intra-warpgroup overlap as its kernels run it: at step j the consumer issues
        S_j = Q K_jᵀ and O += P_{j-1} V_{j-1} together (in turn), waits for S_j, runs
        softmax_j while P_{j-1} V_{j-1} runs, waits for that, then rescales O and converts
        P_j; the last P V after the loop (fa3_fwd.cu; flash-attention's IntraWGOverlap)."""
        stall, my_vars, n = self._stall(c), dict(self.env_vars), self.n
        gemm0, after = self.split
        soft, post, gemm1 = _softmax_split(after)
        w0, w1 = self.gemm_work(gemm0, c), self.gemm_work(gemm1, c)

        def release_v(j):
            others.release(j)
            if self.together:                  # K_j's slot goes back with V_j's
                first.release(j)
        for j in range(n):
            yield from first.wait(j, stall)
            if j:
                yield from others.wait(j - 1, stall)
            done = yield from self.issue_in_turn(c, (w0, w1) if j else (w0,), stall)
            yield from self.wait_until(done[0], stall)       # S_j
            if not self.together:
                first.release(j)
            my_vars[self.var] = self.value(j)
            yield from run_ops(self.ctx, soft, my_vars, self.share, stall, c == 0, self.streams[c])
            if j:
                yield from self.wait_until(done[1], stall)   # P_{j-1} V_{j-1}
                release_v(j - 1)
            yield from self.post(post, my_vars, c, stall)
        if n:
            yield from others.wait(n - 1, stall)
            done = yield from self.issue_in_turn(c, (w1,), stall)
            yield from self.wait_until(done[0], stall)
            release_v(n - 1)


def _run_warp_specialized(ctx, loop: Loop, loads, rest, env_vars: dict):
    """Producer + consumers (_Consumers). With `separate_kv_release` (default) the first load
    of the iteration (K, read by GEMM0) and the others (V, read by the last GEMM) have
    separate rings, as FA-3's K and V pipelines: a K slot is released as soon as every
    consumer's GEMM0 on it has finished, with or without intra_overlap. Without it one stage
    holds both and is released after the last GEMM (with intra_overlap that needs 2 stages:
    K_{j+1} is waited for before V_j's GEMM releases the stage)."""
    env, pipe = ctx.env, ctx.pipe
    n_consumers = max(1, pipe.consumer_warpgroups)
    stages = max(1, pipe.stages)
    split = _overlap_split(rest)
    separate = getattr(pipe, "separate_kv_release", True) and split is not None and len(loads) > 1
    together = not separate
    if together and pipe.intra_overlap and split is not None and stages < 2:
        raise ValueError("intra_overlap with K and V released together needs 2 stages")

    def ring(group):
        return _Ring(ctx, group, loop.var, loop.value, loop.count, stages, n_consumers, env_vars)

    consumers = _Consumers(ctx, loop, rest, env_vars, split, together, n_consumers)
    one_ring = split is None or (not pipe.intra_overlap and together)
    rings = (ring(loads),) if one_ring else (ring(loads[:1]), ring(loads[1:]))
    # the rings issued the first tiles; the consumers first wait for the prologue's loads
    # issued with them (issue_prologue_with_loop: Q_i)
    if ctx.prologue_ready_s > env.now:
        ctx.stall[MEM] += ctx.prologue_ready_s - env.now
        yield env.timeout(ctx.prologue_ready_s - env.now)
    ctx.prologue_ready_s = -1.0
    run = (consumers.plain if one_ring else
           consumers.overlap if pipe.intra_overlap else consumers.plain_split)
    procs = [env.process(run(c, *rings)) for c in range(n_consumers)]
    for p in procs:
        yield p
