"""What a TMA (bulk tensor) copy costs when its rows start off the 32-byte sector: the standard
attention's GEMMs on cuBLAS's sm90 kernels write S and read P through TMA, and at N ≡ 8 mod 16
(fp16 row pitch ≡ 16 mod 32 bytes) every other row starts mid-sector.

Part `store`: a kernel that writes a [z, N, N] fp16 array (~432 MB) as TR × TC tiles, one CTA
per tile, the tile staged in shared memory and written by TMA stores (cp.async.bulk.tensor
global ← shared, boxes of BC columns × TR rows), as a GEMM epilogue does without the GEMM; or,
for comparison, by plain 16-byte st.global (a warp per 256-column row segment, as the earlier
probe in measurements/h200/gemm_pitch/). Switches: the pitch (N), the tile width (TC), the
box width (BC ≤ TC: one box per tile or several), an L2 evict-first hint (TMA: createpolicy;
plain: st.global.cs) and the launch order (`split`: every even column of tiles first, then
every odd one, so that the two halves of a shared sector reach the L2 far apart in time).
Time: CUDA events, median of 10 after 2 warm-ups.

Part `load`: a kernel whose CTAs each read one TR-row block of a matrix through TMA boxes of
64 columns (128 bytes) × TR rows across the whole row, nothing else: the L2→SM bytes Nsight
Compute counts against the bytes asked for, at pitches on and off the sector.

    python3 scripts/experiments/tma_pitch_h200.py store OUT.json
    python3 scripts/experiments/tma_pitch_h200.py load OUT.json
    python3 scripts/experiments/tma_pitch_h200.py one KIND N TC BC HINT ORDER   # for ncu

KIND: tma | plain | load. No validation shape is used: N 3000/3008/3016/4000/4008, z for
~432 MB.
"""
from __future__ import annotations

import ctypes
import json
import statistics
import sys
from pathlib import Path

TARGET_BYTES = 432_000_000
TR = 128

SRC = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
extern "C" __global__ void __launch_bounds__(128) tma_store(const unsigned char* __restrict__ tmap,
        int n, int tiles_c, int tiles_r, int z, int order, int hint, int boxes) {
    extern __shared__ __align__(1024) unsigned char smem[];
    int t = blockIdx.x;
    int R = tiles_r * z, tc, rr;
    if (order == 0) { tc = t % tiles_c; rr = t / tiles_c; }
    else {
        int ce = (tiles_c + 1) / 2, co = tiles_c / 2;
        if (t < ce * R) { tc = 2 * (t % ce); rr = t / ce; }
        else { int t2 = t - ce * R; tc = 2 * (t2 % co) + 1; rr = t2 / co; }
    }
    int tr = rr % tiles_r, m = rr / tiles_r;
    // fill the staged tile (TR x TC halves, box-major: box b holds TR x BC)
    u32* s = (u32*)smem;
    for (int i = threadIdx.x; i < TILE_BYTES / 4; i += blockDim.x) s[i] = 0x3c003c00u + i;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        u64 pol;
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
        for (int b = 0; b < boxes; ++b) {
            u32 src = (u32)__cvta_generic_to_shared(smem + b * TR_ * BC * 2);
            int c0 = tc * TC + b * BC, c1 = tr * TR_;
            if (c0 >= n) break;
            if (hint)
                asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group.L2::cache_hint"
                             " [%0, {%1, %2, %3}], [%4], %5;"
                             :: "l"(tmap), "r"(c0), "r"(c1), "r"(m), "r"(src), "l"(pol) : "memory");
            else
                asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group"
                             " [%0, {%1, %2, %3}], [%4];"
                             :: "l"(tmap), "r"(c0), "r"(c1), "r"(m), "r"(src) : "memory");
        }
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
}

extern "C" __global__ void __launch_bounds__(128) tma_load(const unsigned char* __restrict__ tmap,
        int n, int tiles_r, unsigned int* sink) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) u64 bar[2];
    int tr = blockIdx.x % tiles_r, m = blockIdx.x / tiles_r;
    int steps = (n + 63) / 64;
    u32 b0 = (u32)__cvta_generic_to_shared(&bar[0]);
    if (threadIdx.x == 0) {
        for (int i = 0; i < 2; ++i)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b0 + 8 * i) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        for (int k = 0; k < steps; ++k) {
            int slot = k & 1;
            u32 bar_k = b0 + 8 * slot;
            if (k >= 2) {   // wait for the copy that used this slot
                u32 done, parity = ((k - 2) >> 1) & 1;
                do {
                    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                                 "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar_k), "r"(parity) : "memory");
                } while (!done);
            }
            u32 dst = (u32)__cvta_generic_to_shared(smem + slot * TR_ * 64 * 2);
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar_k), "r"(TR_ * 128) : "memory");
            asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                         " [%0], [%1, {%2, %3, %4}], [%5];"
                         :: "r"(dst), "l"(tmap), "r"(k * 64), "r"(tr * TR_), "r"(m), "r"(bar_k) : "memory");
        }
        for (int k = (steps > 2 ? steps - 2 : 0); k < steps; ++k) {
            u32 bar_k = b0 + 8 * (k & 1), done, parity = (k >> 1) & 1;
            do {
                asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                             "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar_k), "r"(parity) : "memory");
            } while (!done);
        }
        sink[blockIdx.x] = ((u32*)smem)[5];
    }
}

// plain stores: a warp writes one 256-column row segment (32 lanes x 16 bytes) per step
extern "C" __global__ void __launch_bounds__(256) plain_store(unsigned short* out, int n, int tiles_c,
        int tiles_r, int z, int order, int hint) {
    int t = blockIdx.x;
    int R = tiles_r * z, tc, rr;
    if (order == 0) { tc = t % tiles_c; rr = t / tiles_c; }
    else {
        int ce = (tiles_c + 1) / 2, co = tiles_c / 2;
        if (t < ce * R) { tc = 2 * (t % ce); rr = t / ce; }
        else { int t2 = t - ce * R; tc = 2 * (t2 % co) + 1; rr = t2 / co; }
    }
    int tr = rr % tiles_r, m = rr / tiles_r;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    size_t base = (size_t)m * n * n;
    int col = tc * 256 + lane * 8;
    uint4 v = make_uint4(0x3c003c00u + lane, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u);
    for (int r = warp; r < TR_; r += 8) {
        int row = tr * TR_ + r;
        if (row >= n) break;
        unsigned short* p = out + base + (size_t)row * n + col;
        if (col + 8 <= n) {
            size_t a = (size_t)p;
            if ((a & 15) == 0) { if (hint) __stcs((uint4*)p, v); else *(uint4*)p = v; }
            else if ((a & 7) == 0) {
                uint2 x = make_uint2(v.x, v.y), y = make_uint2(v.z, v.w);
                if (hint) { __stcs((uint2*)p, x); __stcs((uint2*)p + 1, y); }
                else { ((uint2*)p)[0] = x; ((uint2*)p)[1] = y; }
            } else { for (int e = 0; e < 4; ++e) ((unsigned*)p)[e] = v.x; }
        } else {
            for (int e = 0; e < 8 && col + e < n; ++e) p[e] = 0x3c00;
        }
    }
}
"""


def z_for(n: int) -> int:
    return max(1, round(TARGET_BYTES / (2 * n * n)))


def _nvrtc_cubin(src: str, opts: list) -> bytes:
    """NVRTC (cuda-bindings) to an sm_90a cubin: CuPy's RawModule does not target sm_90a."""
    from cuda.bindings import nvrtc
    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"tma_pitch.cu", 0, [], [])
    args = [o.encode() for o in opts]
    res = nvrtc.nvrtcCompileProgram(prog, len(args), args)
    if res[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(log.decode(errors="replace")[-3000:])
    _, size = nvrtc.nvrtcGetCUBINSize(prog)
    cubin = b" " * size
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    return cubin


def module(tc: int, bc: int):
    import cupy as cp
    import hashlib
    import os
    import tempfile
    opts = ["--gpu-architecture=sm_90a", "-std=c++17", f"-DTC={tc}", f"-DBC={bc}", f"-DTR_={TR}",
            f"-DTILE_BYTES={TR * tc * 2}"]
    cubin = _nvrtc_cubin(SRC, opts)
    path = os.path.join(tempfile.gettempdir(), hashlib.sha1(cubin).hexdigest() + ".cubin")
    Path(path).write_bytes(cubin)
    return cp.RawModule(path=path)


def tensor_map(ptr: int, n: int, z: int, box_cols: int) -> "object":
    import cupy as cp
    import numpy as np
    from cuda.bindings import driver as cu
    u64, u32 = cu.cuuint64_t, cu.cuuint32_t
    err, tmap = cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, ptr,
        [u64(n), u64(n), u64(z)], [u64(2 * n), u64(2 * n * n)], [u32(box_cols), u32(TR), u32(1)],
        [u32(1)] * 3, cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled: {err}")
    return cp.asarray(np.frombuffer(ctypes.string_at(tmap.getPtr(), 128), dtype=np.uint8))


def runner(kind: str, n: int, tc: int, bc: int, hint: int, order: int):
    """A function that launches one configuration once, and the array it writes."""
    import cupy as cp
    z = z_for(n)
    a = cp.zeros((z, n, n), dtype=cp.float16)
    tiles_r = -(-n // TR)
    if kind == "plain":
        k = module(256, 256).get_function("plain_store")
        tiles_c = -(-n // 256)
        grid = (tiles_c * tiles_r * z,)
        args = (a, cp.int32(n), cp.int32(tiles_c), cp.int32(tiles_r), cp.int32(z), cp.int32(order),
                cp.int32(hint))
        return (lambda: k(grid, (256,), args)), a, None
    if kind == "load":
        mod = module(64, 64)
        k = mod.get_function("tma_load")
        k.max_dynamic_shared_size_bytes = 2 * TR * 64 * 2
        tmap = tensor_map(a.data.ptr, n, z, 64)
        sink = cp.zeros(tiles_r * z, dtype=cp.uint32)
        grid = (tiles_r * z,)
        args = (tmap, cp.int32(n), cp.int32(tiles_r), sink)
        return (lambda: k(grid, (128,), args, shared_mem=2 * TR * 64 * 2)), a, (tmap, sink)
    mod = module(tc, bc)
    k = mod.get_function("tma_store")
    smem = TR * tc * 2
    k.max_dynamic_shared_size_bytes = smem
    tmap = tensor_map(a.data.ptr, n, z, bc)
    tiles_c = -(-n // tc)
    grid = (tiles_c * tiles_r * z,)
    args = (tmap, cp.int32(n), cp.int32(tiles_c), cp.int32(tiles_r), cp.int32(z), cp.int32(order),
            cp.int32(hint), cp.int32(tc // bc))
    return (lambda: k(grid, (128,), args, shared_mem=smem)), a, tmap


def timed_us(fn) -> float:
    import cupy as cp
    for _ in range(2):
        fn()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(10):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3)
    return statistics.median(ts)


STORES = [  # kind, N, TC, BC, hint, order
    *[("tma", n, 128, 128, h, o) for n in (3000, 3008) for h in (0, 1) for o in (0, 1)],
    *[("tma", n, 128, 64, 0, 0) for n in (3000, 3008)],
    *[("tma", n, 168, 168, h, o) for n in (3008,) for h in (0, 1) for o in (0, 1)],
    *[("tma", n, 128, 128, h, 0) for n in (4000, 4008, 3016) for h in (0, 1)],
    *[("tma", n, 256, 256, 0, 0) for n in (3000, 3008)],
    *[("plain", n, 256, 256, h, o) for n in (3000, 3008) for h in (0, 1) for o in (0, 1)],
]
LOADS = [("load", n, 64, 64, 0, 0) for n in (3000, 3008, 4000, 4008, 3016)]


def table(cases, out: Path) -> None:
    rows = []
    for case in cases:
        kind, n, tc, bc, hint, order = case
        fn, a, keep = runner(*case)
        us = timed_us(fn)
        nbytes = a.nbytes
        print(f"{kind:5s} N{n} z{z_for(n)} TC{tc} BC{bc} hint{hint} order{order} "
              f"pitch%32={(2 * n) % 32:2d} {us:8.1f} us {nbytes / us / 1e6:5.2f} TB/s", flush=True)
        rows.append({"kind": kind, "n": n, "z": z_for(n), "tc": tc, "bc": bc, "hint": hint,
                     "order": order, "tr": TR, "bytes": nbytes, "us": us})
        del a, keep
    out.write_text(json.dumps({"rows": rows}, indent=1))


def one(kind: str, n: int, tc: int, bc: int, hint: int, order: int) -> None:
    import cupy as cp
    fn, a, keep = runner(kind, n, tc, bc, hint, order)
    fn()
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    if sys.argv[1] == "one":
        one(sys.argv[2], *map(int, sys.argv[3:8]))
    else:
        table(STORES if sys.argv[1] == "store" else LOADS, Path(sys.argv[2]))
