"""Launch the kernels of a Schedule on the GPU (CuPy), optionally in trace mode.

`run_schedule` walks `schedule.kernels` in order and launches, for each, the CUDA kernel of
the same name with that Kernel's grid, threads per CTA and dynamic shared memory, compiled for
the Schedule's Tiling: the kernel the simulator reasons about is, launch for launch, the one
that runs. Tensors live in a dict of CuPy arrays keyed by the schedule's tensor names
("Q", "K", "V", "O", "LSE", "dO", ...); outputs are allocated poisoned with NaN.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import IosimError
from .build import get_kernel
from .trace import Trace, decode

NAN16 = {"fp16": 0x7E00, "bf16": 0x7FC0}


def _cp():
    try:
        import cupy as cp
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise IosimError("the kernels need cupy and an NVIDIA GPU (pip install cupy-cuda13x)") from exc
    return cp


def storage_dtype(dtype: str):
    if dtype == "fp16":
        return np.float16
    if dtype == "bf16":
        return np.uint16
    raise IosimError(f"the kernels support fp16 and bf16, not {dtype}")


def poisoned(shape, dtype: str, fp32: bool = False):
    """A device array filled with NaN (so unwritten elements are caught)."""
    cp = _cp()
    if fp32:
        return cp.full(shape, np.nan, dtype=np.float32)
    a = cp.empty(shape, dtype=np.uint16)
    a.fill(NAN16[dtype])
    return a.view(storage_dtype(dtype)) if dtype == "fp16" else a


class Launcher:
    """Runs one Schedule's kernels; keeps compiled kernels and trace buffers."""

    def __init__(self, schedule, trace: bool = False, fa3_variant=None):
        self.schedule = schedule
        self.fa3_variant = fa3_variant     # hopper.Fa3Variant (None: the full FA-3 kernel)
        self.problem = p = schedule.problem
        self.trace = trace
        self.traces: list = []
        self.untraced: list = []
        self.scale = 1.0 / math.sqrt(p.head_dim)
        if p.head_dim not in (64, 128):
            raise IosimError(f"the CUDA kernels support head dims 64 and 128, not {p.head_dim}")
        storage_dtype(p.dtype)

    # ---- helpers ------------------------------------------------------------------------
    def _tiling(self, kernel_name: str):
        t = self.schedule.tiling
        return t["bwd"] if ("bwd" in kernel_name and "bwd" in t) else t["fwd"]

    def _trace_buffer(self, kernel):
        cp = _cp()
        if not self.trace:
            return np.uint64(0), 0, None
        from ..schedule import expand
        cap = max(len(list(expand(kernel.program(c)))) for c in range(kernel.num_ctas)) + 64
        buf = cp.zeros(kernel.num_ctas * (1 + 4 * cap), dtype=np.uint64)
        return buf, cap, buf

    def _record(self, kernel, buf, cap):
        if buf is None:
            return
        la = kernel.launch
        self.traces.append(decode(buf.get(), kernel.name, tuple(la.grid), la.threads_per_cta,
                                  la.smem_bytes_per_cta, cap))

    def _launch(self, kernel, source, function, defines, args):
        la = kernel.launch
        k = get_kernel(source, function, defines, self.problem.dtype, self.trace, la.smem_bytes_per_cta)
        buf, cap, keep = self._trace_buffer(kernel)
        k(tuple(la.grid), (la.threads_per_cta,), (*args, buf, np.int32(cap)),
          shared_mem=la.smem_bytes_per_cta)
        self._record(kernel, keep, cap)
        return k

    # ---- the kernels ----------------------------------------------------------------------
    def run(self, tensors: dict) -> dict:
        """Launch every kernel of the schedule; `tensors` gains the outputs. Returns it."""
        for kernel in self.schedule.kernels:
            fn = getattr(self, "k_" + kernel.name, None)
            if fn is None:
                raise IosimError(f"no CUDA kernel implements schedule kernel {kernel.name!r}")
            fn(kernel, tensors)
        return tensors

    def _dims(self):
        p = self.problem
        return (np.int32(p.batch), np.int32(p.heads_q), np.int32(p.heads_kv), np.int32(p.seq_q),
                np.int32(p.seq_kv), np.int32(1 if p.causal else 0), np.float32(self.scale))

    def _defines(self, t):
        return {"IOSIM_D": self.problem.head_dim, "IOSIM_BQ": t.block_q, "IOSIM_BKV": t.block_kv,
                "IOSIM_WARPS": t.warps, "IOSIM_STAGES": t.stages}

    def _out(self, tensors, name, shape, fp32=False):
        if name not in tensors:
            tensors[name] = poisoned(shape, self.problem.dtype, fp32)
        return tensors[name]

    # fa2 forward
    def k_fa2_fwd(self, kernel, T):
        p, t = self.problem, self._tiling(kernel.name)
        if (t.block_q // t.warps) % 16 or t.block_kv % 16:
            raise IosimError(f"fa2 forward kernel needs block_q/warps and block_kv multiples of 16, got {t.describe()}")
        o = self._out(T, "O", (p.batch, p.heads_q, p.seq_q, p.head_dim))
        lse = self._out(T, "LSE", (p.batch, p.heads_q, p.seq_q), fp32=True)
        self._launch(kernel, "fa2_fwd.cu", "fa2_fwd", self._defines(t),
                     (T["Q"], T["K"], T["V"], o, lse, *self._dims()))

    # fa2 backward
    def k_fa2_bwd_preprocess(self, kernel, T):
        p, t = self.problem, self._tiling(kernel.name)
        self._out(T, "D", (p.batch, p.heads_q, p.seq_q), fp32=True)
        self._out(T, "dQaccum", (p.batch, p.heads_q, p.seq_q, p.head_dim), fp32=True)
        self._launch(kernel, "fa2_bwd.cu", "fa2_bwd_preprocess", self._defines(t),
                     (T["O"], T["dO"], T["D"], T["dQaccum"], np.int32(p.heads_q), np.int32(p.seq_q),
                      np.int32(t.block_q)))

    def k_fa2_bwd(self, kernel, T):
        p, t = self.problem, self._tiling(kernel.name)
        heads = p.heads_q if p.group_size > 1 else p.heads_kv
        dk_name, dv_name = ("dK_expanded", "dV_expanded") if p.group_size > 1 else ("dK", "dV")
        dk = self._out(T, dk_name, (p.batch, heads, p.seq_kv, p.head_dim))
        dv = self._out(T, dv_name, (p.batch, heads, p.seq_kv, p.head_dim))
        self._launch(kernel, "fa2_bwd.cu", "fa2_bwd", self._defines(t),
                     (T["Q"], T["K"], T["V"], T["dO"], T["LSE"], T["D"], T["dQaccum"], dk, dv,
                      *self._dims()))

    def k_fa2_bwd_convert_dq(self, kernel, T):
        p, t = self.problem, self._tiling(kernel.name)
        dq = self._out(T, "dQ", (p.batch, p.heads_q, p.seq_q, p.head_dim))
        self._launch(kernel, "fa2_bwd.cu", "fa2_bwd_convert_dq", self._defines(t),
                     (T["dQaccum"], dq, np.int32(p.heads_q), np.int32(p.seq_q), np.int32(t.block_q),
                      np.float32(self.scale)))

    def k_fa2_bwd_reduce_dkv(self, kernel, T):
        p, t = self.problem, self._tiling(kernel.name)
        dk = self._out(T, "dK", (p.batch, p.heads_kv, p.seq_kv, p.head_dim))
        dv = self._out(T, "dV", (p.batch, p.heads_kv, p.seq_kv, p.head_dim))
        self._launch(kernel, "fa2_bwd.cu", "fa2_bwd_reduce_dkv", self._defines(t),
                     (T["dK_expanded"], T["dV_expanded"], dk, dv, np.int32(p.heads_q),
                      np.int32(p.heads_kv), np.int32(p.seq_kv), np.int32(t.block_kv)))

    # fa1 forward
    def k_fa1_fwd(self, kernel, T):
        p, t = self.problem, self._tiling(kernel.name)
        if t.stages != 1:
            raise IosimError(f"the fa1 kernel loads, waits and computes (stages 1), got {t.describe()}")
        o = self._out(T, "O", (p.batch, p.heads_q, p.seq_q, p.head_dim))
        l = self._out(T, "l", (p.batch, p.heads_q, p.seq_q), fp32=True)
        m = self._out(T, "m", (p.batch, p.heads_q, p.seq_q), fp32=True)
        self._launch(kernel, "fa1_fwd.cu", "fa1_fwd", self._defines(t),
                     (T["Q"], T["K"], T["V"], o, l, m, *self._dims()))

    # fa3 forward (Hopper, sm_90a): built and launched by hopper.py
    def k_fa3_fwd(self, kernel, T):
        from . import hopper
        hopper.launch(self, kernel, T, self.fa3_variant or hopper.FULL)

    # flash-decoding: split-KV kernel + combine (iosim/kernels/decode.py launches both)
    def k_fd_split(self, kernel, T):
        from .decode import DecodeLaunch, make_runner, run_decode, schedule_inputs
        launch = DecodeLaunch.from_schedule(self.schedule)
        if "seqlens" not in T:
            T.update(schedule_inputs(self.problem, T))
        if self.trace:
            self.traces += run_decode(launch, T, trace=True)
            return
        runners = self.__dict__.setdefault("_fd_runners", {})   # per input set: args built once
        if id(T) not in runners:
            runners[id(T)] = (T, make_runner(launch, T))
        runners[id(T)][1]()

    def k_fd_combine(self, kernel, T):
        """Launched by k_fd_split right after the split kernel."""

    # standard: cuBLAS GEMMs around the traced softmax kernel
    @staticmethod
    def _matmul(a, b):
        """a @ b by cuBLAS in fp16 with fp32 accumulation. Through torch (zero-copy DLPack)
        where torch is installed: cupy.matmul on float16 was seen (ncu, H200) to copy both
        operands to float32 first, traffic the standard schedule does not have."""
        try:
            import torch
        except ImportError:
            return _cp().matmul(a, b)
        cp = _cp()
        ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
        return cp.from_dlpack(torch.matmul(ta, tb))

    def _grouped(self, x):
        p = self.problem
        g = p.group_size
        return x if g == 1 else x.reshape(p.batch, p.heads_kv, 1, *x.shape[2:])

    def k_std_fwd_qk(self, kernel, T):
        p = self.problem
        if p.dtype != "fp16":
            raise IosimError("standard attention's GEMMs run on float16 arrays: fp16 only")
        self.untraced.append(kernel.name)
        q = T["Q"].reshape(p.batch, p.heads_kv, p.group_size, p.seq_q, p.head_dim) \
            if p.group_size > 1 else T["Q"]
        k = self._grouped(T["K"])
        # S = Q Kᵀ unscaled (the 1/√d is applied in the softmax kernel: the same bytes)
        s = self._matmul(q, k.swapaxes(-1, -2))
        T["S"] = s.reshape(p.batch, p.heads_q, p.seq_q, p.seq_kv)

    def k_std_fwd_softmax(self, kernel, T):
        from ..algorithms.standard import SOFTMAX_CHUNK
        p = self.problem
        pm = self._out(T, "P", (p.batch, p.heads_q, p.seq_q, p.seq_kv))
        single = kernel.launch.smem_bytes_per_cta == 4 * p.seq_kv * p.elem_bytes
        self._launch(kernel, "softmax.cu", "std_softmax", {"IOSIM_D": p.head_dim, "IOSIM_CHUNK": SOFTMAX_CHUNK},
                     (T["S"], pm, np.int32(p.heads_q), np.int32(p.seq_q), np.int32(p.seq_kv),
                      np.int32(1 if p.causal else 0), np.float32(self.scale), np.int32(1 if single else 0)))

    def k_std_fwd_pv(self, kernel, T):
        p = self.problem
        self.untraced.append(kernel.name)
        pm = T["P"].reshape(p.batch, p.heads_kv, p.group_size, p.seq_q, p.seq_kv) \
            if p.group_size > 1 else T["P"]
        o = self._matmul(pm, self._grouped(T["V"]))
        T["O"] = o.reshape(p.batch, p.heads_q, p.seq_q, p.head_dim)


def run_schedule(schedule, tensors: dict, trace: bool = False):
    """Launch every kernel of `schedule` on `tensors` (CuPy arrays); returns (tensors,
    Trace | None)."""
    ln = Launcher(schedule, trace)
    ln.run(tensors)
    tr = None
    if trace:
        _cp().cuda.runtime.deviceSynchronize()
        p = schedule.problem
        tr = Trace(schedule.algorithm, p.to_dict(),
                   {k: vars(v) for k, v in schedule.tiling.items()}, ln.traces, ln.untraced)
    return tensors, tr


def device_inputs(host: dict, dtype: str) -> dict:
    cp = _cp()
    return {k: cp.asarray(v) for k, v in host.items()}


def forward_schedule(problem, algorithm: str, gpu: str = "h200", **tiling):
    from ..algorithms import build_schedule
    return build_schedule(problem.with_(direction="fwd"), gpu, algorithm, **tiling)


def capture(problem, algorithm: str = "fa2", gpu: str = "h200", seed: int = 0, **tiling) -> Trace:
    """Run `algorithm` on random inputs in trace mode and return the decoded Trace.

    problem.direction "bwd": a forward (fa2, untraced) first makes O and LSE."""
    from ..algorithms import build_schedule
    from .reference import random_inputs

    rng = np.random.default_rng(seed)
    schedule = build_schedule(problem, gpu, algorithm, **tiling)
    host = random_inputs(problem, rng, with_grad=problem.direction != "fwd")
    T = device_inputs(host, problem.dtype)
    if problem.direction == "bwd":
        run_schedule(forward_schedule(problem, "fa2", gpu), T)
    _, tr = run_schedule(schedule, T, trace=True)
    return tr
