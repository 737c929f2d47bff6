"""The FA-3 forward kernel (cuda/fa3_fwd.cu): sm_90a build, TMA tensor maps, launch.

wgmma and setmaxnreg exist only on the sm_90a target, which CuPy's RawModule does not ask
NVRTC for; so the source is compiled here to a cubin for sm_90a (NVRTC through cuda-bindings,
else nvcc) and loaded with cupy.RawModule(path=...). The producer's TMA copies read 3-d tensor
maps (head_dim, seq, batch·heads) with 128-byte swizzle, encoded by the driver
(cuTensorMapEncodeTiled through cuda-bindings) and handed to the kernel in device memory.

Feature switches (compile-time, FA3_* in the .cu): `Fa3Variant`. The default is the full
kernel the fa3 schedule describes; the others remove one overlap each (the ablation).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ..errors import IosimError
from .build import options, source_text

SOURCE = "fa3_fwd.cu"
TMAP_BYTES = 128
SWIZZLE_COLS = 64            # a 128-byte swizzle row holds 64 16-bit elements
NULL = np.uint64(0)          # a null pointer kernel argument


@dataclass(frozen=True)
class Fa3Variant:
    """Which of FA-3's overlaps the kernel is built with (all on = the fa3 schedule)."""

    warp_specialized: bool = True
    pingpong: bool = True
    intra_overlap: bool = True
    tma: bool = True
    separate_kv_release: bool = True     # False: the kernel before issue 12 (one barrier per stage)

    def defines(self) -> dict:
        return {"FA3_WARP_SPECIALIZED": int(self.warp_specialized), "FA3_PINGPONG": int(self.pingpong),
                "FA3_INTRA_OVERLAP": int(self.intra_overlap), "FA3_TMA": int(self.tma),
                "FA3_SEPARATE_KV_RELEASE": int(self.separate_kv_release)}

    def name(self) -> str:
        off = [n for n, on in (("ws", self.warp_specialized), ("pingpong", self.pingpong),
                               ("intra", self.intra_overlap),
                               ("separate-kv-release", self.separate_kv_release)) if not on]
        base = "fa3" + ("" if not off else "-no-" + "-no-".join(off))
        return base + ("" if self.tma else "+cp.async")


FULL = Fa3Variant()
ABLATIONS = {"full": FULL,
             "no_warp_specialization": replace(FULL, warp_specialized=False),
             "no_pingpong": replace(FULL, pingpong=False),
             "no_intra_overlap": replace(FULL, intra_overlap=False)}


def threads(block_q: int, variant: Fa3Variant) -> int:
    """Consumer warpgroups (one per 64 rows) plus the producer warpgroup when specialized."""
    return 128 * (block_q // 64 + (1 if variant.warp_specialized else 0))


def defines(problem, tiling, variant: Fa3Variant) -> dict:
    d = {"IOSIM_D": problem.head_dim, "IOSIM_BQ": tiling.block_q, "IOSIM_BKV": tiling.block_kv,
         "IOSIM_STAGES": tiling.stages, "IOSIM_WARPS": threads(tiling.block_q, variant) // 32}
    d.update(variant.defines())
    return d


def check_tiling(problem, tiling) -> None:
    if problem.head_dim not in (64, 128):
        raise IosimError(f"the fa3 kernel supports head dims 64 and 128, not {problem.head_dim}")
    if tiling.block_q % 64 or not 64 <= tiling.block_q <= 192:
        raise IosimError(f"the fa3 kernel needs block_q 64, 128 or 192, got {tiling.describe()}")
    if tiling.block_kv not in (64, 128):
        raise IosimError(f"the fa3 kernel needs block_kv 64 or 128, got {tiling.describe()}")
    if not 1 <= tiling.stages <= 4:
        raise IosimError(f"the fa3 kernel needs 1 to 4 stages, got {tiling.describe()}")


# ---- build -----------------------------------------------------------------------------------
def _nvrtc_cubin(src: str, opts: list) -> bytes:
    from cuda.bindings import nvrtc

    def ok(res):
        err = res[0] if isinstance(res, tuple) else res
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(str(err))
        return res[1:] if isinstance(res, tuple) else ()

    (prog,) = ok(nvrtc.nvrtcCreateProgram(src.encode(), SOURCE.encode(), 0, [], []))
    args = [o.encode() for o in opts]
    res = nvrtc.nvrtcCompileProgram(prog, len(args), args)
    if res[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        (size,) = ok(nvrtc.nvrtcGetProgramLogSize(prog))
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise IosimError("NVRTC could not compile fa3_fwd.cu: " + log.decode(errors="replace")[-2000:])
    (size,) = ok(nvrtc.nvrtcGetCUBINSize(prog))
    cubin = b" " * size
    ok(nvrtc.nvrtcGetCUBIN(prog, cubin))
    return cubin


def _nvcc_cubin(src: str, opts: list) -> bytes:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise IosimError("building the fa3 kernel needs NVRTC (cuda-bindings) or nvcc")
    with tempfile.TemporaryDirectory() as tmp:
        cu, out = os.path.join(tmp, SOURCE), os.path.join(tmp, "fa3.cubin")
        with open(cu, "w") as f:
            f.write(src)
        res = subprocess.run([nvcc, "-cubin", "-gencode=arch=compute_90a,code=sm_90a", *opts, "-o", out, cu],
                             capture_output=True, text=True)
        if res.returncode:
            raise IosimError("nvcc could not compile fa3_fwd.cu: " + res.stderr[-2000:])
        with open(out, "rb") as f:
            return f.read()


def build_options(defs: dict, dtype: str, trace: bool) -> list:
    return list(options(defs, dtype, trace))


def compile_cubin(defs: dict, dtype: str, trace: bool) -> tuple:
    """(cubin bytes, compiler used) for sm_90a."""
    src = source_text(SOURCE)
    opts = build_options(defs, dtype, trace)
    try:
        return _nvrtc_cubin(src, ["--gpu-architecture=sm_90a", *opts]), "nvrtc"
    except ImportError:
        return _nvcc_cubin(src, opts), "nvcc"


@lru_cache(maxsize=None)
def _function(key: tuple):
    import cupy as cp
    defs, dtype, trace = dict(key[0]), key[1], key[2]
    cubin, _ = compile_cubin(defs, dtype, trace)
    cache = os.path.join(tempfile.gettempdir(), "iosim-fa3")
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, hashlib.sha1(cubin).hexdigest() + ".cubin")
    with open(path, "wb") as f:
        f.write(cubin)
    return cp.RawModule(path=path).get_function("fa3_fwd")


def get_kernel(defs: dict, dtype: str, trace: bool, dynamic_smem: int):
    k = _function((tuple(sorted(defs.items())), dtype, trace))
    k.max_dynamic_shared_size_bytes = dynamic_smem
    return k


# ---- TMA tensor maps -----------------------------------------------------------------------
def _encode_raw(ptr: int, data_type, dims: list, strides_bytes: list, box: list) -> bytes:
    """A tiled tensor map (innermost dimension first), 128-byte swizzle, out-of-range elements
    read as zeros; its 128 bytes."""
    from cuda.bindings import driver as cu
    u64, u32 = cu.cuuint64_t, cu.cuuint32_t
    err, tmap = cu.cuTensorMapEncodeTiled(
        data_type, len(dims), ptr, [u64(x) for x in dims], [u64(x) for x in strides_bytes],
        [u32(x) for x in box], [u32(1)] * len(dims),
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise IosimError(f"cuTensorMapEncodeTiled failed: {err}")
    return ctypes.string_at(tmap.getPtr(), TMAP_BYTES)


def _encode(ptr: int, dtype: str, seq: int, heads: int, d: int, box_rows: int) -> bytes:
    """A 3-d tensor map over a [heads][seq][d] 16-bit array: box 64 × box_rows × 1."""
    from cuda.bindings import driver as cu
    dt = (cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 if dtype == "bf16"
          else cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16)
    return _encode_raw(ptr, dt, [d, seq, heads], [d * 2, seq * d * 2], [SWIZZLE_COLS, box_rows, 1])


def tensor_maps(problem, tiling, q, k, v):
    """The Q, K, V tensor maps, 128 bytes each, in one device buffer (64-byte aligned)."""
    import cupy as cp
    p = problem
    raw = (_encode(q.data.ptr, p.dtype, p.seq_q, p.batch * p.heads_q, p.head_dim, tiling.block_q)
           + _encode(k.data.ptr, p.dtype, p.seq_kv, p.batch * p.heads_kv, p.head_dim, tiling.block_kv)
           + _encode(v.data.ptr, p.dtype, p.seq_kv, p.batch * p.heads_kv, p.head_dim, tiling.block_kv))
    return cp.asarray(np.frombuffer(raw, dtype=np.uint8))


def launch(launcher, kernel, T: dict, variant: Fa3Variant = FULL):
    """Run the fa3_fwd schedule kernel on tensors T (CuPy arrays); O and LSE are added."""
    import cupy as cp
    p = launcher.problem
    t = launcher._tiling(kernel.name)
    check_tiling(p, t)
    o = launcher._out(T, "O", (p.batch, p.heads_q, p.seq_q, p.head_dim))
    lse = launcher._out(T, "LSE", (p.batch, p.heads_q, p.seq_q), fp32=True)
    la = kernel.launch
    nthreads = threads(t.block_q, variant)
    k = get_kernel(defines(p, t, variant), p.dtype, launcher.trace, la.smem_bytes_per_cta)
    # tensor maps per input set, encoded once (they hold the arrays' addresses: keep them alive)
    cache = launcher.__dict__.setdefault("fa3_maps", {})
    key = (T["Q"].data.ptr, T["K"].data.ptr, T["V"].data.ptr, variant.tma)
    if key not in cache:
        maps = tensor_maps(p, t, T["Q"], T["K"], T["V"]) if variant.tma else cp.zeros(1, dtype=np.uint8)
        cache[key] = (maps, T["Q"], T["K"], T["V"])
    maps = cache[key][0]
    buf, cap, keep = launcher._trace_buffer(kernel)
    k(tuple(la.grid), (nthreads,),
      (T["Q"], T["K"], T["V"], o, lse, maps, NULL, NULL, NULL, *launcher._dims(), buf, np.int32(cap)),
      shared_mem=la.smem_bytes_per_cta)
    launcher._record(kernel, keep, cap)
    return k
