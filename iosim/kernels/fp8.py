"""FP8 (e4m3) FA-3 forward: per-block quantization of Q, K, V, the optional Hadamard rotation
of Q and K (incoherent processing), and the launch of fa3_fwd.cu built with -DIOSIM_FP8.

Quantization (on the GPU, through torch): one fp32 scale per block, scale = amax / 448 (448 is
the largest finite e4m3 value, OCP 8-bit floating point specification), Q per CTA block
(block_q rows of one head), K and V per KV block (block_kv rows). V is stored transposed
(Vᵀ [batch][kv head][d][N]: fp8 wgmma reads both operands K-major) with its columns permuted
within every 16 as the kernel's P operand needs (`v_permutation`).

Rotation: Q ← Q·H, K ← K·H with H the d×d Sylvester–Hadamard matrix over √d (orthogonal, so
Q·Kᵀ is unchanged in exact arithmetic); it spreads an outlier feature over all d, which lowers
each block's amax and so the quantization step of every other element.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import IosimError

E4M3_MAX = 448.0


def hadamard(d: int) -> np.ndarray:
    """The d×d Sylvester–Hadamard matrix divided by √d (d a power of two)."""
    if d & (d - 1):
        raise IosimError(f"the Hadamard rotation needs a power-of-two head dim, not {d}")
    h = np.ones((1, 1))
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return h / math.sqrt(d)


def v_permutation(n: int) -> np.ndarray:
    """perm[k]: the key whose V row goes to position k of Vᵀ. Within each 16 keys, position
    4t+e holds key 2t+e (e < 2) or 8+2t+(e−2): the keys whose P values thread t of a quad holds
    in the fp32 accumulator, where the e4m3 A operand wants four consecutive k."""
    if n % 16:
        raise IosimError(f"fp8 needs seq_kv a multiple of 16 (the rows of Vᵀ are 16-byte aligned), got {n}")
    p = np.arange(16)
    t, e = p // 4, p % 4
    within = np.where(e < 2, 2 * t + e, 8 + 2 * t + e - 2)
    return (np.arange(n) // 16 * 16 + np.tile(within, n // 16)).astype(np.int64)


def quantize_blocks(x, block: int):
    """x [BH, N, D] (torch, float) → (e4m3 bytes [BH, N, D] as uint8, scales [BH, ceil(N/block)])."""
    import torch
    bh, n, d = x.shape
    nb = -(-n // block)
    pad = torch.zeros(bh, nb * block, d, device=x.device, dtype=torch.float32)
    pad[:, :n] = x.float()
    blocks = pad.view(bh, nb, block, d)
    amax = blocks.abs().amax(dim=(2, 3))
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    q = (blocks / scale[:, :, None, None]).to(torch.float8_e4m3fn).view(torch.uint8)
    return q.view(bh, nb * block, d)[:, :n].contiguous(), scale.contiguous()


def prepare(problem, tiling, q, k, v, rotate: bool) -> dict:
    """Quantized operands and scales for one problem (q, k, v: torch fp16 [B, H, N, d])."""
    import torch
    b, hq, hkv, nq, nkv, d = (problem.batch, problem.heads_q, problem.heads_kv, problem.seq_q,
                              problem.seq_kv, problem.head_dim)
    perm = torch.as_tensor(v_permutation(nkv), device=q.device)
    qf, kf = q.float(), k.float()
    if rotate:
        h = torch.as_tensor(hadamard(d), device=q.device, dtype=torch.float32)
        qf, kf = qf @ h, kf @ h
    q8, sq = quantize_blocks(qf.reshape(b * hq, nq, d), tiling.block_q)
    k8, sk = quantize_blocks(kf.reshape(b * hkv, nkv, d), tiling.block_kv)
    v8, sv = quantize_blocks(v.float().reshape(b * hkv, nkv, d), tiling.block_kv)
    vt8 = v8[:, perm, :].transpose(1, 2).contiguous()           # [BH, d, N], keys permuted
    return {"q8": q8, "k8": k8, "vt8": vt8, "sq": sq, "sk": sk, "sv": sv}


def _maps(problem, tiling, ops) -> "object":
    import cupy as cp
    from cuda.bindings import driver as cu
    from .hopper import TMAP_BYTES, _encode_raw
    p, u8 = problem, cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8
    d = p.head_dim
    raw = (_encode_raw(ops["q8"].data_ptr(), u8, [d, p.seq_q, p.batch * p.heads_q], [d, p.seq_q * d],
                       [d, tiling.block_q, 1])
           + _encode_raw(ops["k8"].data_ptr(), u8, [d, p.seq_kv, p.batch * p.heads_kv], [d, p.seq_kv * d],
                         [d, tiling.block_kv, 1])
           + _encode_raw(ops["vt8"].data_ptr(), u8, [p.seq_kv, d, p.batch * p.heads_kv],
                         [p.seq_kv, d * p.seq_kv], [tiling.block_kv, d, 1]))
    assert len(raw) == 3 * TMAP_BYTES
    return cp.asarray(np.frombuffer(raw, dtype=np.uint8))


class Fp8Launcher:
    """Runs the fp8 fa3 forward of `schedule` (a fa3 Schedule of an fp8 problem) on prepared
    operands; O is fp16 [B, Hq, Nq, d], LSE fp32."""

    def __init__(self, schedule, variant=None):
        from .hopper import FULL, check_tiling
        p = schedule.problem
        if p.dtype != "fp8" or schedule.algorithm != "fa3":
            raise IosimError("Fp8Launcher runs fa3 schedules of fp8 problems")
        self.schedule, self.problem, self.variant = schedule, p, variant or FULL
        self.tiling = schedule.tiling["fwd"]
        check_tiling(p, self.tiling)
        if p.head_dim != 128 or self.tiling.block_kv != 128 or not self.variant.tma:
            raise IosimError("the fp8 kernel needs head dim 128, block_kv 128 and TMA copies")
        self.maps: dict = {}

    def run(self, ops: dict, out: dict | None = None) -> dict:
        import cupy as cp
        from .hopper import NULL, defines, get_kernel, threads
        p, t, k = self.problem, self.tiling, self.schedule.kernels[0]
        key = ops["q8"].data_ptr()
        if key not in self.maps:
            self.maps[key] = _maps(p, t, ops)
        out = out if out is not None else {}
        if "O" not in out:
            out["O"] = cp.full((p.batch, p.heads_q, p.seq_q, p.head_dim), np.nan, dtype=np.float16)
            out["LSE"] = cp.full((p.batch, p.heads_q, p.seq_q), np.nan, dtype=np.float32)
        defs = defines(p, t, self.variant)
        defs["IOSIM_FP8"] = 1
        la = k.launch
        fn = get_kernel(defs, "fp16", False, la.smem_bytes_per_cta)
        c = {n: cp.from_dlpack(ops[n]) for n in ("q8", "k8", "vt8", "sq", "sk", "sv")}
        fn(tuple(la.grid), (threads(t.block_q, self.variant),),
           (c["q8"], c["k8"], c["vt8"], out["O"], out["LSE"], self.maps[key], c["sq"], c["sk"], c["sv"],
            np.int32(p.batch), np.int32(p.heads_q), np.int32(p.heads_kv), np.int32(p.seq_q),
            np.int32(p.seq_kv), np.int32(1 if p.causal else 0), np.float32(1.0 / math.sqrt(p.head_dim)),
            NULL, np.int32(0)),
           shared_mem=la.smem_bytes_per_cta)
        return out
