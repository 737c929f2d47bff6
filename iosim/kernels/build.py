"""Compile the CUDA sources with CuPy's NVRTC (lazily, cached per tiling/dtype/trace flag)."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

CUDA_DIR = Path(__file__).parent / "cuda"
SOURCES = ("fa2_fwd.cu", "fa2_bwd.cu", "fa1_fwd.cu", "softmax.cu", "decode.cu")
STATIC_SMEM_LIMIT = 48 * 1024


def source_text(name: str) -> str:
    """The .cu file with iosim_common.cuh inlined (NVRTC gets no include path)."""
    text = (CUDA_DIR / name).read_text()
    header = (CUDA_DIR / "iosim_common.cuh").read_text().replace("#pragma once", "")
    return re.sub(r'#include "iosim_common.cuh"', lambda _: header, text)


def options(defines: dict, dtype: str, trace: bool) -> tuple:
    opts = ["-std=c++17"] + [f"-D{k}={v}" for k, v in sorted(defines.items())]
    if dtype == "bf16":
        opts.append("-DIOSIM_BF16")
    if trace:
        opts.append("-DIOSIM_TRACE")
    return tuple(opts)


@lru_cache(maxsize=None)
def _module(name: str, opts: tuple):
    import cupy as cp
    return cp.RawModule(code=source_text(name), options=opts)


def get_kernel(source: str, function: str, defines: dict, dtype: str, trace: bool,
               dynamic_smem: int = 0):
    """A compiled kernel; its dynamic shared-memory limit raised to `dynamic_smem` if needed."""
    k = _module(source, options(defines, dtype, trace)).get_function(function)
    if dynamic_smem > STATIC_SMEM_LIMIT:
        k.max_dynamic_shared_size_bytes = dynamic_smem
    return k


def kernel_attributes(k) -> dict:
    """Registers, local (spill) bytes, static shared memory of a compiled kernel."""
    a = k.attributes
    return {"num_regs": a.get("num_regs"), "local_size_bytes": a.get("local_size_bytes"),
            "shared_size_bytes": a.get("shared_size_bytes")}
