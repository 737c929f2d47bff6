"""What a warpgroup's softmax costs a neighbour's wgmma on one SM (H200, sm_90a).

    python3 -m iosim.measure.wgmma_overlap [OUT.json]

One CTA per SM, up to three warpgroups, each given a role (a fixed amount of work) and
timed with clock64 from a common start to its own end; the median over the CTAs is kept.
Roles (the d = 64 FA-3 iteration of one 64-row consumer with block_kv 128, per tile):
  mma      S = Q Kᵀ: 4 × wgmma m64n128k16 SS (1.05 MFLOP), one commit group, wait_group 1
  mma_w0   the same, wait_group 0 after every group (one group in flight)
  mma_rs   O += P V: 8 × wgmma m64n64k16 RS (A from registers, 1.05 MFLOP), wait_group 1
  exp      64 elements per thread: FFMA + MUFU.EX2 each
  softmax  64 elements per thread, d = 64: row max (FMNMX), FFMA, MUFU.EX2, FADD per element,
           O rescale (FMUL) and fp16 packing (F2FP) per two elements — the kernel's softmax
  ffma     64 elements per thread, 4 FFMA each
  intra    one warpgroup: issue the mma group, run the softmax tile on other registers,
           wait for the group (FA-3's intra-warpgroup overlap)
A pair (mma, softmax) run together shows whether the SM overlaps them (each takes its alone
time) or not (the times add). Results: rates per SM per clock and each role's slowdown."""
from __future__ import annotations

import json
import sys

PROBE_SRC = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
#ifndef PROBE_NT
#define PROBE_NT 256
#endif
enum { IDLE = 0, MMA = 1, MMA_W0 = 2, MMA_RS = 3, EXPR = 4, SFX = 5, FFMA = 6, INTRA = 7 };

__device__ __forceinline__ u64 sw128_desc(u32 addr, u32 lbo, u32 sbo) {
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)((lbo >> 4) & 0x3FFF) << 16)
           | ((u64)((sbo >> 4) & 0x3FFF) << 32) | ((u64)1 << 62);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
template <int R> __device__ __forceinline__ void reg_fence(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
__device__ __forceinline__ float ex2(float x) { float y; asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ u32 pack2(float a, float b) {
    u32 r; asm("cvt.rn.f16x2.f32 %0, %2, %1;" : "=r"(r) : "f"(a), "f"(b)); return r;
}
__device__ __forceinline__ void ss_n128(float (&d)[64], u64 da, u64 db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db));
}
__device__ __forceinline__ void rs_n64(float (&d)[32], const u32 (&a)[4], u64 db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

// the d = 64 softmax of one 64 x 128 tile, this thread's 64 scores s and 32 O accumulators o
__device__ __forceinline__ void softmax_tile(float (&s)[64], float (&o)[32], float& m, float& l, u32& bits) {
    float mx = m;
#pragma unroll
    for (int x = 0; x < 64; ++x) mx = fmaxf(mx, s[x]);
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
    const float alpha = ex2(m - mx);
    m = mx;
    float sum = 0.f;
#pragma unroll
    for (int x = 0; x < 64; ++x) { const float p = ex2(fmaf(s[x], 1.4427f, -mx)); s[x] = p; sum += p; }
    l = l * alpha + sum;
#pragma unroll
    for (int x = 0; x < 32; ++x) o[x] *= alpha;
#pragma unroll
    for (int x = 0; x < 32; ++x) bits ^= pack2(s[2 * x], s[2 * x + 1]);
}

extern "C" __global__ void __launch_bounds__(PROBE_NT, 1)
probe(int r0, int r1, int r2, int n_mma, int n_sfx, u64* out, float* sink) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const int tid = threadIdx.x, wg = tid / 128, t = tid % 128;
    for (int i = tid; i < 24576 / 4; i += PROBE_NT) ((u32*)smem)[i] = 0x3c003c00u * (i & 1);
    __syncthreads();
    const u32 base = (u32)__cvta_generic_to_shared(smem);
    const u32 s_a = base, s_b = base + 8192;        // A 64 x 64, B 128 x 64 (or V 128 x 64)
    const int role = wg == 0 ? r0 : wg == 1 ? r1 : r2;
    u64 t0 = clock64();
    float acc[64];
    float s[64], o[32];
    float m = 0.f, l = 0.f;
    u32 bits = 0;
#pragma unroll
    for (int x = 0; x < 64; ++x) { acc[x] = 0.f; s[x] = (float)((t + x) & 7) * 0.125f; }
#pragma unroll
    for (int x = 0; x < 32; ++x) o[x] = 1.f;
    if (role == MMA || role == MMA_W0) {
        for (int g = 0; g < n_mma; ++g) {
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < 4; ++kk)
                ss_n128(acc, sw128_desc(s_a + kk * 32, 16, 1024), sw128_desc(s_b + kk * 32, 16, 1024));
            wg_commit();
            if (role == MMA) wg_wait<1>(); else wg_wait<0>();
        }
        wg_wait<0>();
        reg_fence(acc);
    } else if (role == MMA_RS) {
        const u32 a[4] = {0x3c003c00u, 0u, 0x3c003c00u, 0u};
        for (int g = 0; g < n_mma; ++g) {
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < 8; ++kk) rs_n64(o, a, sw128_desc(s_b + kk * 2048, 128 * 128, 1024));
            wg_commit();
            wg_wait<1>();
        }
        wg_wait<0>();
        reg_fence(o);
    } else if (role == EXPR) {
        for (int it = 0; it < n_sfx; ++it) {
            const float mm = s[0] * 0.25f;
#pragma unroll
            for (int x = 0; x < 64; ++x) s[x] = ex2(fmaf(s[x], -0.5f, mm));
        }
    } else if (role == SFX) {
        for (int it = 0; it < n_sfx; ++it) softmax_tile(s, o, m, l, bits);
    } else if (role == FFMA) {
        for (int it = 0; it < n_sfx; ++it) {
#pragma unroll
            for (int x = 0; x < 64; ++x) {
                float v = s[x];
                v = fmaf(v, 0.999f, 1e-3f); v = fmaf(v, 0.999f, 1e-3f);
                v = fmaf(v, 0.999f, 1e-3f); v = fmaf(v, 0.999f, 1e-3f);
                s[x] = v;
            }
        }
#if PROBE_NT <= 256
    } else if (role == INTRA) {
        for (int g = 0; g < n_mma; ++g) {
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < 4; ++kk)
                ss_n128(acc, sw128_desc(s_a + kk * 32, 16, 1024), sw128_desc(s_b + kk * 32, 16, 1024));
            wg_commit();
            softmax_tile(s, o, m, l, bits);
            wg_wait<0>();
            reg_fence(acc);
        }
#endif
    }
    u64 t1 = clock64();
    float keep = m + l + (float)(bits & 1);
#pragma unroll
    for (int x = 0; x < 64; ++x) keep += acc[x] + s[x];
#pragma unroll
    for (int x = 0; x < 32; ++x) keep += o[x];
    if (keep == 12345.678f) sink[tid] = keep;         // keeps the work; never true in practice
    if (t == 0) {
        out[(blockIdx.x * 3 + wg) * 2] = t0;
        out[(blockIdx.x * 3 + wg) * 2 + 1] = t1;
    }
}
"""

ROLES = {"idle": 0, "mma": 1, "mma_w0": 2, "mma_rs": 3, "exp": 4, "softmax": 5, "ffma": 6, "intra": 7}
MMA_FLOPS_PER_GROUP = 4 * 64 * 128 * 16 * 2          # = 8 x m64n64k16 too
ELEMENTS_PER_TILE = 64 * 128                          # one warpgroup's 64 x 128 score tile
# (roles of warpgroups 0, 1, 2): alone, then pairs and triples
CONFIGS = [("mma",), ("mma_w0",), ("mma_rs",), ("exp",), ("softmax",), ("ffma",), ("intra",),
           ("mma", "mma"), ("exp", "exp"), ("softmax", "softmax"),
           ("mma", "exp"), ("mma", "softmax"), ("mma", "ffma"), ("mma_rs", "softmax"),
           ("mma", "softmax", "softmax"), ("mma", "mma", "softmax"), ("mma", "mma", "mma"),
           ("softmax", "softmax", "softmax"),
           # FA-3's d 64 consumers: three RS P·V streams, S with P·V, and three intra loops
           ("mma_rs", "mma_rs"), ("mma_rs", "mma_rs", "mma_rs"), ("mma", "mma_rs"),
           ("intra", "intra"), ("intra", "intra", "intra")]


def _module(nt: int):
    import cupy as cp
    import hashlib
    import os
    import tempfile
    from iosim.kernels.hopper import _nvrtc_cubin
    cubin = _nvrtc_cubin(PROBE_SRC, ["--gpu-architecture=sm_90a", "-std=c++17", f"-DPROBE_NT={nt}"])
    path = os.path.join(tempfile.gettempdir(), "probe-" + hashlib.sha1(cubin).hexdigest() + ".cubin")
    with open(path, "wb") as f:
        f.write(cubin)
    return cp.RawModule(path=path).get_function("probe"), path


def run(n_mma: int = 4000, n_sfx: int = 2000) -> dict:
    import cupy as cp
    import numpy as np
    dev = cp.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    kernels = {}
    out = cp.zeros(sms * 6, dtype=np.uint64)
    sink = cp.zeros(384, dtype=np.float32)
    res = {"sm_count": sms, "n_mma_groups": n_mma, "n_softmax_tiles": n_sfx, "rows": []}
    smem = 120 * 1024                                  # one CTA per SM
    for roles in CONFIGS:
        nt = 256 if len(roles) <= 2 else 384
        if nt not in kernels:
            kernels[nt] = _module(nt)
            kernels[nt][0].max_dynamic_shared_size_bytes = smem
        fn = kernels[nt][0]
        out.fill(0)
        r = [ROLES[x] for x in roles] + [0] * (3 - len(roles))
        n_work = {"ffma": 2 * n_sfx}
        args = lambda: (np.int32(r[0]), np.int32(r[1]), np.int32(r[2]), np.int32(n_mma),
                        np.int32(n_sfx), out, sink)
        fn((sms,), (nt,), args(), shared_mem=smem)   # warm-up
        cp.cuda.runtime.deviceSynchronize()
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        fn((sms,), (nt,), args(), shared_mem=smem)
        e1.record()
        e1.synchronize()
        ms = cp.cuda.get_elapsed_time(e0, e1)
        n_wg = nt // 128                               # the warpgroups this launch has
        ts = out.get().reshape(sms, 3, 2)[:, :n_wg].astype(np.int64)
        start = ts[:, :, 0].min(axis=1)                # common start: the first of them
        row = {"roles": list(roles), "kernel_ms": ms, "wg": []}
        for w, name in enumerate(roles):
            cyc = float(np.median(ts[:, w, 1] - start))
            rate = {}
            if name.startswith("mma"):
                rate["flop_per_clk_per_sm"] = n_mma * MMA_FLOPS_PER_GROUP / cyc
            elif name == "intra":
                rate["flop_per_clk_per_sm"] = n_mma * MMA_FLOPS_PER_GROUP / cyc
                rate["elements_per_clk_per_sm"] = n_mma * ELEMENTS_PER_TILE / cyc
            else:
                rate["elements_per_clk_per_sm"] = n_sfx * ELEMENTS_PER_TILE / cyc
            row["wg"].append({"role": name, "cycles": cyc, **rate})
        row["clock_mhz"] = max(w["cycles"] for w in row["wg"]) / (ms * 1e3)
        res["rows"].append(row)
        print(json.dumps(row), flush=True)
    res["cubins"] = {str(nt): path for nt, (_, path) in kernels.items()}
    return res


def table(res: dict) -> str:
    alone = {}
    lines = ["# wgmma / softmax overlap on one SM (median over CTAs; cycles from a common start)",
             f"# {res['sm_count']} CTAs, one per SM; mma work {res['n_mma_groups']} groups of "
             f"{MMA_FLOPS_PER_GROUP} FLOP, softmax-type work {res['n_softmax_tiles']} tiles of "
             f"{ELEMENTS_PER_TILE} elements", "roles                         wg  role        cycles   rate             vs alone"]
    for row in res["rows"]:
        for w in row["wg"]:
            if len(row["roles"]) == 1:
                alone[w["role"]] = w["cycles"]
    for row in res["rows"]:
        for k, w in enumerate(row["wg"]):
            rate = (f"{w['flop_per_clk_per_sm']:7.0f} FLOP/clk" if "flop_per_clk_per_sm" in w
                    else f"{w['elements_per_clk_per_sm']:7.2f} elem/clk")
            a = alone.get(w["role"])
            lines.append(f"{'+'.join(row['roles']):29s} {k:2d}  {w['role']:9s} {w['cycles']:9.0f}   {rate}   "
                         f"{w['cycles'] / a if a else float('nan'):6.3f}")
        lines.append(f"{'':29s}     clock {row['clock_mhz']:.0f} MHz")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    res = run()
    txt = table(res)
    print(txt)
    if argv:
        with open(argv[0], "w") as f:
            json.dump(res, f, indent=1)
        with open(argv[0].rsplit(".", 1)[0] + ".txt", "w") as f:
            f.write(txt + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
