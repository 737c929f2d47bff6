"""Size limits: the largest problems and schedules iosim accepts, checked before any work.

Every accepted problem must have a bounded cost, so a typo (`--seq 10**12`) is refused in one
line instead of running out of memory. docs/limits.md lists each limit, why it is where it is,
and what the refusal says; the figures quoted there come from benchmarks/limits_cost.py.

- seq_q, seq_kv ≤ MAX_SEQ: longer than any published context window, and the Q-block index
  space stays ≤ 2^20 blocks even with 16-row tiles.
- batch, heads_q, heads_kv ≤ MAX_BATCH_HEADS: the FA-2 and FA-3 kernels launch one grid
  row per batch entry and per head, and CUDA limits gridDim.y and gridDim.z to 65,535 (CUDA
  C++ Programming Guide, technical specifications per compute capability).
- The problem's tensors must fit the GPU's DRAM (a kernel whose Q, K, V and O do not fit
  cannot run on it). Standard attention's S and P are not included: its byte counts are shown
  as what it would move.
- The schedule's distinct CTA programs (tile classes, counted one by one by every model) ≤
  MAX_TILE_CLASSES; CTAs the fast simulator dispatches ≤ MAX_SIM_CTAS; tile operations the
  exact simulator replays one event each ≤ MAX_EXACT_TILE_OPS.
"""
from __future__ import annotations

from .errors import IosimError

MAX_SEQ = 2 ** 24                 # 16,777,216 tokens
MAX_BATCH_HEADS = 65_535          # batch, heads: CUDA's gridDim.y/.z limit (FA-2/FA-3 grids)
MAX_TILE_CLASSES = 2 ** 18        # 262,144 distinct CTA programs
MAX_SIM_CTAS = 2 ** 23            # 8,388,608 CTAs in --model sim (fast mode)
MAX_EXACT_TILE_OPS = 2 ** 24      # 16,777,216 loads + stores + MMAs in --mode exact

LIMITS_HELP = (f"Size limits (docs/limits.md): seq and seq-kv at most {MAX_SEQ:,}; batch and "
               f"heads at most {MAX_BATCH_HEADS:,}; the "
               f"problem's tensors must fit the GPU's DRAM; at most {MAX_TILE_CLASSES:,} tile "
               f"classes; with --model sim at most {MAX_SIM_CTAS:,} CTAs (fast mode) or "
               f"{MAX_EXACT_TILE_OPS:,} tile operations (exact mode).")


class LimitError(IosimError):
    """A problem or schedule beyond a stated size limit (the message names the limit)."""


def tensor_bytes(problem) -> tuple[int, str]:
    """Bytes of the tensors one pass reads and writes in DRAM, and their names."""
    q, kv, o = problem.q_bytes(), problem.kv_bytes(), problem.o_bytes()
    if problem.direction == "fwd":
        return q + kv + o, "Q, K, V, O"
    return 2 * (q + kv + o), "Q, K, V, O, dO, dQ, dK, dV"   # each gradient mirrors its tensor


def check_problem(problem, gpu) -> None:
    """Refuse a problem whose tensors do not fit the GPU's DRAM."""
    need, names = tensor_bytes(problem)
    if need > gpu.dram_capacity_bytes:
        raise LimitError(
            f"the problem's tensors ({names}) take {need / 2**30:,.1f} GiB but {gpu.short_name} "
            f"has {gpu.dram_capacity_bytes / 2**30:,.1f} GiB of DRAM; reduce batch, heads or seq")


def schedule_size(schedule) -> dict:
    """Tile classes and CTAs of a schedule (summed over its kernels)."""
    classes = sum(len(k.classes) for k in schedule.kernels)
    ctas = sum(k.num_ctas for k in schedule.kernels)
    return {"classes": classes, "ctas": ctas}


def _tile_ops(schedule) -> int:
    t = schedule.totals()
    return t.loads + t.stores + t.mma_ops


def check_schedule(schedule, model: str = "roofline", sim_mode: str = "fast") -> None:
    """Refuse a schedule beyond the limits of the model that would process it. Called after
    the schedule is built (building is cheap: one tuple entry per class) and before counting
    or simulating."""
    size = schedule_size(schedule)
    what = f"{schedule.algorithm} on this problem"
    if size["classes"] > MAX_TILE_CLASSES:
        raise LimitError(
            f"{what} has {size['classes']:,} distinct CTA programs (tile classes), above the "
            f"limit of {MAX_TILE_CLASSES:,}; use a shorter seq or larger --block-q/--block-kv")
    if model != "sim":
        return
    if sim_mode == "exact":
        ops = _tile_ops(schedule)
        if ops > MAX_EXACT_TILE_OPS:
            raise LimitError(
                f"{what} has {ops:,} tile operations, above the exact simulator's limit of "
                f"{MAX_EXACT_TILE_OPS:,}; use --mode fast or --model roofline")
    elif size["ctas"] > MAX_SIM_CTAS:
        raise LimitError(
            f"{what} launches {size['ctas']:,} CTAs, above the simulator's limit of "
            f"{MAX_SIM_CTAS:,}; use --model roofline, or fewer batch, heads or seq")


def preflight(problem, gpu, algorithm: str, model: str = "roofline", sim_mode: str = "fast",
              **tiling):
    """What analyze() would refuse, found without counting or simulating (for commands that
    run several analyses: each is checked before the first one starts). Returns the schedule."""
    from .algorithms import build_schedule
    from .hardware import load_gpu
    gpu = load_gpu(gpu)
    check_problem(problem, gpu)
    schedule = build_schedule(problem, gpu, algorithm, **tiling)
    check_schedule(schedule, model, sim_mode)
    return schedule
