"""Schedule generators, one module per algorithm, behind one entry point."""
from __future__ import annotations

from importlib import import_module

from ..errors import IosimError
from ..hardware import load_gpu

ALGORITHMS = ("standard", "fa1", "fa2", "fa3", "square", "flash-decoding",
              "flash-decoding-cascade")
TILING_KEYS = ("block_q", "block_kv", "stages", "warps")
DECODE_KEYS = ("splits",)    # flash-decoding only (iosim/algorithms/flash_decoding.py)
# fa2 and fa3 only: whose kernels the schedule describes (iosim/algorithms/fa2.py, fa3.py: KERNELS)
KERNEL_KEYS = ("kernel",)
# standard only: the tiles cuBLAS is known to run (iosim/algorithms/cublas_tiles.py)
GEMM_TILE_KEYS = ("gemm_tiles",)


def build_schedule(problem, gpu, algorithm: str = "fa2", **overrides):
    """The Schedule of `algorithm` for `problem` on `gpu`.

    overrides: block_q, block_kv, stages, warps (applied to every pass), or the same keys
    prefixed with bwd_ (backward pass only); splits (flash-decoding), kernel (fa2, fa3),
    gemm_tiles (standard).
    """
    if algorithm not in ALGORITHMS:
        raise IosimError(f"unknown algorithm {algorithm!r}; choose from: {', '.join(ALGORITHMS)}")
    decode = {k: overrides.pop(k) for k in DECODE_KEYS if k in overrides}
    kernel = overrides.pop("kernel", None)
    gemm_tiles = overrides.pop("gemm_tiles", None)
    if algorithm != "standard":
        gemm_tiles = None       # other algorithms ignore it (as splits; `run` refuses it)
    if kernel is not None and algorithm not in ("fa2", "fa3"):
        raise IosimError(f"kernel={kernel!r} describes FA-2 / FA-3 kernels; algorithm {algorithm!r} has none")
    # other algorithms ignore splits (so `iosim compare` can pass it to all; `run` refuses it)
    unknown = set(overrides) - set(TILING_KEYS) - {"bwd_" + k for k in TILING_KEYS}
    if unknown:
        raise IosimError(f"unknown tiling option(s): {', '.join(sorted(unknown))}")
    fwd = {k: overrides.get(k) for k in TILING_KEYS}
    bwd = {k: overrides.get("bwd_" + k, overrides.get(k)) for k in TILING_KEYS}
    from .kvcache import check_supported, paginate
    check_supported(problem, algorithm)
    module = import_module(f".{algorithm.split('-cascade')[0].replace('-', '_')}", __name__)
    if algorithm == "flash-decoding-cascade":
        from . import flash_decoding
        schedule = flash_decoding.build_cascade(problem, load_gpu(gpu), fwd, bwd,
                                                decode.get("splits"))
    elif algorithm == "flash-decoding":
        schedule = module.build(problem, load_gpu(gpu), fwd, bwd, decode.get("splits"))
    elif gemm_tiles is not None:
        schedule = module.build(problem, load_gpu(gpu), fwd, bwd, gemm_tiles=gemm_tiles)
    elif kernel is not None:
        schedule = module.build(problem, load_gpu(gpu), fwd, bwd, kernel=kernel)
    else:
        schedule = module.build(problem, load_gpu(gpu), fwd, bwd)
    return paginate(schedule) if problem.page_size else schedule
