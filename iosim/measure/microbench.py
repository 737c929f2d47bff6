"""Calibration microbenchmarks (GPU only; imports cupy and nothing of the core).

Each function returns a figure and says how it was measured. Run on the GPU machine as
`python3 -m iosim.measure.microbench -o calibration.json`; `iosim calibrate --from-json`
turns the JSON into iosim/data/gpus/<gpu>-calibrated.yaml on any machine.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

_SRC = r"""
extern "C" __global__ void l2_read(const float4* __restrict__ buf, long long n_vec,
                                   int reps, float* __restrict__ sink) {
    // every CTA sweeps a rotating window of the buffer with 16-byte L2-only loads (ld.global.cg)
    float acc = 0.f;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (int r = 0; r < reps; ++r) {
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += stride) {
            float4 v = __ldcg(buf + i);
            acc += v.x + v.y + v.z + v.w;
        }
    }
    if (acc == 1234.5f) sink[0] = acc;   // keeps the loads alive
}

extern "C" __global__ void exp_rate(float* __restrict__ out, int iters,
                                    long long* __restrict__ cycles) {
    // 8 independent chains of ex2.approx per thread; clock64 measures SM cycles
    float x0 = threadIdx.x * 1e-7f, x1 = x0 + 1e-3f, x2 = x0 + 2e-3f, x3 = x0 + 3e-3f;
    float x4 = x0 + 4e-3f, x5 = x0 + 5e-3f, x6 = x0 + 6e-3f, x7 = x0 + 7e-3f;
    __syncthreads();
    long long t0 = clock64();
    for (int i = 0; i < iters; ++i) {
        asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x0)); asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x1));
        asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x2)); asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x3));
        asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x4)); asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x5));
        asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x6)); asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x7));
    }
    __syncthreads();
    long long t1 = clock64();
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
    out[blockIdx.x * blockDim.x + threadIdx.x] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}

extern "C" __global__ void mma_sync_rate(float* __restrict__ out, int iters) {
    // warp-level mma.sync.m16n8k16 (fp16 in, fp32 accumulate) on 8 independent accumulators
    unsigned a0 = 0x3c003c00u ^ threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3;
    unsigned b0 = 0x3c003c00u ^ (threadIdx.x << 1), b1 = b0 + 1;
    float c[8][4];
    #pragma unroll
    for (int k = 0; k < 8; ++k) { c[k][0] = c[k][1] = c[k][2] = c[k][3] = 0.f; }
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int k = 0; k < 8; ++k) {
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        }
    }
    float acc = 0.f;
    #pragma unroll
    for (int k = 0; k < 8; ++k) acc += c[k][0] + c[k][1] + c[k][2] + c[k][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

extern "C" __global__ void empty_kernel() {}
"""


# fp32 atomic reduction into L2, the access pattern of FA-2's dQaccum (fa2_bwd.cu)
_ATOMIC_SRC = r"""
extern "C" __global__ void red_tile(float* __restrict__ buf, int tile_floats, int share, int n_tiles,
                                    int reps, int layout, int op) {
    // CTA c adds (op 1, 2: red.global.add.f32 scalar / .v4) or stores (op 0) one fp32 tile of
    // tile_floats per rep into tile ((c / share) + r) % n_tiles: the `share` CTAs of a group
    // hit the same tile at the same time, different groups different tiles. layout 0: a warp
    // covers 128 contiguous bytes per instruction; layout 1: the mma.sync accumulator fragment
    // of FA-2's dQ (8 rows x 4 lanes x 2 adjacent floats, 16 warp-rows, d = 128 columns)
    const int group = blockIdx.x / share;
    const float v = 1.0f;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
    for (int r = 0; r < reps; ++r) {
        float* tile = buf + (long long)((group + r) % n_tiles) * tile_floats;
        if (layout == 0) {
            if (op == 2) {
                for (int e = threadIdx.x * 4; e < tile_floats; e += blockDim.x * 4)
                    asm volatile("red.global.add.v4.f32 [%0], {%1, %1, %1, %1};"
                                 :: "l"(tile + e), "f"(v) : "memory");
            } else {
                for (int e = threadIdx.x; e < tile_floats; e += blockDim.x) {
                    if (op == 1) asm volatile("red.global.add.f32 [%0], %1;" :: "l"(tile + e), "f"(v) : "memory");
                    else asm volatile("st.global.f32 [%0], %1;" :: "l"(tile + e), "f"(v) : "memory");
                }
            }
        } else {
            const int rows = tile_floats / 128;
            for (int r16 = warp * 16; r16 < rows; r16 += nwarp * 16)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    float* dst = tile + (long long)(r16 + (lane >> 2) + hf * 8) * 128 + (lane & 3) * 2;
#pragma unroll
                    for (int n = 0; n < 16; ++n) {
                        if (op == 1) {
                            asm volatile("red.global.add.f32 [%0], %1;" :: "l"(dst + n * 8), "f"(v) : "memory");
                            asm volatile("red.global.add.f32 [%0], %1;" :: "l"(dst + n * 8 + 1), "f"(v) : "memory");
                        } else {
                            asm volatile("st.global.f32 [%0], %1;" :: "l"(dst + n * 8), "f"(v) : "memory");
                            asm volatile("st.global.f32 [%0], %1;" :: "l"(dst + n * 8 + 1), "f"(v) : "memory");
                        }
                    }
                }
        }
    }
}
"""



# mma.sync with ldmatrix operand reads from shared memory, the inner loop of the FA-2 family's
# GEMMs (iosim/kernels/cuda/fa2_fwd.cu; flash-attention's flash::gemm, csrc/flash_attn/src/
# utils.h). Per k-step a warp loads MT A fragments (16x16, one ldmatrix.x4 each; none when A is
# in registers) and NT/2 B fragment pairs (16x16 = two n8 tiles, one ldmatrix.x4 each), then
# issues MT x NT mma.sync.m16n8k16 into MT x NT independent accumulators. MT = 2, NT = 8 is a
# warp's share of FA-2's S = Q K^T (2 x 16 rows, 64 columns); with A in registers it is the
# P V product's ratio. Modes:
#   0 mma only (fragments from registers: the tensor-core ceiling at this warp count)
#   1 ldmatrix only (the shared-memory operand-read ceiling)
#   2 load-then-use: the loop is not unrolled; a step's ldmatrix, then its MMAs
#   3 double-buffered: fragments of step k+1 loaded before the MMAs of step k (two sets)
#   4 unrolled x8, load-then-use as written (fa2_fwd.cu's kk loop; ptxas may hoist the loads)
#   5 unrolled x8, fragments of step k+1 loaded before the MMAs of step k (flash::gemm)
_MMA_LDSM_SRC = r"""
typedef unsigned int u32;
#define MT 2
#define NT 8
__device__ __forceinline__ void ldsm4(u32 (&r)[4], u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void mma(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <bool A_LD>
__device__ __forceinline__ void load(u32 (&a)[MT][4], u32 (&b)[NT / 2][4], u32 base, int k) {
    // 16 fragments of 512 contiguous bytes rotate through an 8 KiB window: each 8-lane phase
    // of an ldmatrix reads 128 contiguous bytes (all 32 banks, no conflict)
    const u32 s = base + (u32)((k * (MT + NT / 2)) & 15) * 512;
    if (A_LD) {
#pragma unroll
        for (int m = 0; m < MT; ++m) ldsm4(a[m], s + m * 512);
    }
#pragma unroll
    for (int n = 0; n < NT / 2; ++n) ldsm4(b[n], s + (MT + n) * 512);
}
__device__ __forceinline__ void mmas(float (&c)[MT][NT][4], const u32 (&a)[MT][4], const u32 (&b)[NT / 2][4]) {
#pragma unroll
    for (int n = 0; n < NT / 2; ++n)
#pragma unroll
        for (int m = 0; m < MT; ++m) {
            mma(c[m][2 * n], a[m], b[n][0], b[n][1]);
            mma(c[m][2 * n + 1], a[m], b[n][2], b[n][3]);
        }
}
template <int MODE, bool A_LD>
__device__ void body(float* out, int steps, long long* cycles, unsigned char* smem) {
    const int tid = threadIdx.x, lane = tid & 31;
    for (int i = tid; i < 8192 / 4; i += blockDim.x)
        ((u32*)smem)[i] = 0x3c003c00u ^ (i * 0x00010001u & 0x03ff03ffu);   // fp16 values near 1
    __syncthreads();
    u32 base;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(base) : "l"(smem));
    base += lane * 16;
    float c[MT][NT][4];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n) c[m][n][0] = c[m][n][1] = c[m][n][2] = c[m][n][3] = 0.f;
    u32 a0[MT][4], b0[NT / 2][4], a1[MT][4], b1[NT / 2][4];
#pragma unroll
    for (int m = 0; m < MT; ++m) a0[m][0] = a0[m][1] = a0[m][2] = a0[m][3] = a1[m][0] = a1[m][1] = a1[m][2] = a1[m][3] = 0x3c003c00u ^ lane;
#pragma unroll
    for (int n = 0; n < NT / 2; ++n) b0[n][0] = b0[n][1] = b0[n][2] = b0[n][3] = b1[n][0] = b1[n][1] = b1[n][2] = b1[n][3] = 0x3c003c00u ^ (lane << 1);
    u32 sink = 0;
    __syncthreads();
    const long long t0 = clock64();
    if (MODE == 0) {
#pragma unroll 1
        for (int k = 0; k < steps; ++k) mmas(c, a0, b0);
    } else if (MODE == 1) {
#pragma unroll 1
        for (int k = 0; k < steps; ++k) {
            load<A_LD>(a0, b0, base, k);
#pragma unroll
            for (int n = 0; n < NT / 2; ++n) sink ^= b0[n][0] ^ b0[n][1] ^ b0[n][2] ^ b0[n][3];
#pragma unroll
            for (int m = 0; m < MT; ++m) sink ^= a0[m][0] ^ a0[m][1] ^ a0[m][2] ^ a0[m][3];
        }
    } else if (MODE == 2) {
#pragma unroll 1
        for (int k = 0; k < steps; ++k) { load<A_LD>(a0, b0, base, k); mmas(c, a0, b0); }
    } else if (MODE == 3) {
        load<A_LD>(a0, b0, base, 0);
#pragma unroll 1
        for (int k = 0; k < steps; k += 2) {
            load<A_LD>(a1, b1, base, k + 1); mmas(c, a0, b0);
            load<A_LD>(a0, b0, base, k + 2); mmas(c, a1, b1);
        }
    } else if (MODE == 4) {
#pragma unroll 1
        for (int k = 0; k < steps; k += 8) {
#pragma unroll
            for (int kk = 0; kk < 8; ++kk) { load<A_LD>(a0, b0, base, k + kk); mmas(c, a0, b0); }
        }
    } else {
#pragma unroll 1
        for (int k = 0; k < steps; k += 8) {
            load<A_LD>(a0, b0, base, k);
#pragma unroll
            for (int kk = 0; kk < 8; kk += 2) {
                load<A_LD>(a1, b1, base, k + kk + 1); mmas(c, a0, b0);
                if (kk < 6) load<A_LD>(a0, b0, base, k + kk + 2);
                mmas(c, a1, b1);
            }
        }
    }
    __syncthreads();
    const long long t1 = clock64();
    if (tid == 0) cycles[blockIdx.x] = t1 - t0;
    float acc = (float)(sink & 1);
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n) acc += c[m][n][0] + c[m][n][1] + c[m][n][2] + c[m][n][3];
    out[blockIdx.x * blockDim.x + tid] = acc;
}
#define MMA_LDSM_KERNEL(MODE, ALD) \
extern "C" __global__ void mma_ldsm_m##MODE##_a##ALD(float* out, int steps, long long* cycles) { \
    extern __shared__ __align__(128) unsigned char smem[]; \
    body<MODE, ALD>(out, steps, cycles, smem); }
MMA_LDSM_KERNEL(0, 1) MMA_LDSM_KERNEL(1, 1) MMA_LDSM_KERNEL(2, 1) MMA_LDSM_KERNEL(3, 1)
MMA_LDSM_KERNEL(4, 1) MMA_LDSM_KERNEL(5, 1)
MMA_LDSM_KERNEL(1, 0) MMA_LDSM_KERNEL(2, 0) MMA_LDSM_KERNEL(3, 0) MMA_LDSM_KERNEL(4, 0)
MMA_LDSM_KERNEL(5, 0)
"""

# The FA-2 forward inner loop on one SM with its data in shared memory only (no global loads):
# per warp and KV step, S = Q K^T (32 rows x 64 columns over d = 128: 8 k-steps of 2 Q + 4 K
# ldmatrix.x4 and 16 mma.sync), the online softmax of fa2_fwd.cu (row max over quads of lanes,
# P = exp2(S·c − m), row sums, O rescale), O += P V (4 k-steps of 8 transposed V ldmatrix.x4 and
# 32 mma.sync; P from registers). The code of iosim/kernels/cuda/fa2_fwd.cu's loop at
# block_q 128, block_kv 64, d 128, 4 warps. MODE 0: all of it; 1: the GEMMs only (P = S packed,
# no softmax); 2: the softmax only (S from the O accumulators, no MMA, no ldmatrix). Whether the
# parts overlap on the SM (time = max) or add up (time = sum), at 1 and 2 CTAs per SM.
_FA2_LOOP_SRC = r"""
typedef unsigned int u32;
#ifndef D
#define D 128
#endif
#define BQ 128
#ifndef BKV
#define BKV 64
#endif
#define WARPS 4
#define RW (BQ / WARPS)
#define MT (RW / 16)
#define NS (BKV / 8)
#define NO (D / 8)
#define CD (D / 8)
__device__ __forceinline__ u32 swz(int row, int chunk, int cpr) { return (u32)((row * cpr + (chunk ^ (row & 7))) * 16); }
__device__ __forceinline__ void ldsm_x4(u32& r0, u32& r1, u32& r2, u32& r3, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr)); }
__device__ __forceinline__ void ldsm_x4_t(u32& r0, u32& r1, u32& r2, u32& r3, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr)); }
__device__ __forceinline__ void mma16816(float* c, const u32* a, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1)); }
__device__ __forceinline__ float fast_exp2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ u32 pack2(float lo, float hi) { u32 r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
template <int MODE>
__device__ void fa2_loop_body(float* out, int steps, long long* cycles, unsigned char* smem) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    for (int i = tid; i < (BQ + 2 * BKV) * D / 2; i += blockDim.x)
        ((u32*)smem)[i] = 0x2c002c00u ^ (i * 0x00010001u & 0x00ff00ffu);     // fp16 values ~0.06
    __syncthreads();
    u32 s_q; asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(s_q) : "l"(smem));
    const u32 s_k = s_q + BQ * D * 2, s_v = s_k + BKV * D * 2;
    const float scale_log2 = 0.0883883f * 1.44269504f;
    float o[MT][NO][4], m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int n = 0; n < NO; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
        m[mt][0] = m[mt][1] = -1e30f; l[mt][0] = l[mt][1] = 0.f;
    }
    __syncthreads();
    const long long t0 = clock64();
#pragma unroll 1
    for (int j = 0; j < steps; ++j) {
        u32 qoff[4], koff[4], voff[4];
        { int ln = lane; asm volatile("" : "+r"(ln));
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            qoff[c] = s_q + swz(warp * RW + (ln & 15), c * 2 + (ln >> 4), CD);
            koff[c] = s_k + swz((ln & 7) + ((ln >> 4) << 3), c * 2 + ((ln >> 3) & 1), CD);
            voff[c] = s_v + swz((ln & 7) + (((ln >> 3) & 1) << 3), c * 2 + (ln >> 4), CD); } }
        float s[MT][NS][4];
        if (MODE != 2) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int n = 0; n < NS; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) {
                u32 a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
                    ldsm_x4(a[mt][0], a[mt][1], a[mt][2], a[mt][3], qoff[kk & 3] + mt * 16 * CD * 16 + (kk >> 2) * 128);
#pragma unroll
                for (int np = 0; np < NS / 2; ++np) {
                    u32 b0, b1, b2, b3;
                    ldsm_x4(b0, b1, b2, b3, koff[kk & 3] + np * 16 * CD * 16 + (kk >> 2) * 128);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) { mma16816(s[mt][2 * np], a[mt], b0, b1); mma16816(s[mt][2 * np + 1], a[mt], b2, b3); }
                }
            }
        } else {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int n = 0; n < NS; ++n)
#pragma unroll
                    for (int e = 0; e < 4; ++e) s[mt][n][e] = o[mt][n % NO][e] + (float)(j & 7);
        }
        if (MODE != 1) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    float mx = m[mt][hf];
#pragma unroll
                    for (int n = 0; n < NS; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * hf], s[mt][n][2 * hf + 1]));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
                    const float m_use = mx * scale_log2;
                    const float alpha = fast_exp2(m[mt][hf] * scale_log2 - m_use);
                    m[mt][hf] = mx;
                    float sum = 0.f;
#pragma unroll
                    for (int n = 0; n < NS; ++n) {
                        float p0 = fast_exp2(s[mt][n][2 * hf] * scale_log2 - m_use);
                        float p1 = fast_exp2(s[mt][n][2 * hf + 1] * scale_log2 - m_use);
                        s[mt][n][2 * hf] = p0; s[mt][n][2 * hf + 1] = p1; sum += p0 + p1;
                    }
                    l[mt][hf] = l[mt][hf] * alpha + sum;
#pragma unroll
                    for (int n = 0; n < NO; ++n) { o[mt][n][2 * hf] *= alpha; o[mt][n][2 * hf + 1] *= alpha; }
                }
        }
        if (MODE != 2) {
#pragma unroll
            for (int kk = 0; kk < BKV / 16; ++kk) {
                u32 a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    a[mt][0] = pack2(s[mt][2 * kk][0], s[mt][2 * kk][1]); a[mt][1] = pack2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                    a[mt][2] = pack2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]); a[mt][3] = pack2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
                }
#pragma unroll
                for (int dp = 0; dp < NO / 2; ++dp) {
                    u32 b0, b1, b2, b3;
                    ldsm_x4_t(b0, b1, b2, b3, voff[dp & 3] + kk * 16 * CD * 16 + (dp >> 2) * 128);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) { mma16816(o[mt][2 * dp], a[mt], b0, b1); mma16816(o[mt][2 * dp + 1], a[mt], b2, b3); }
                }
            }
        }
        __syncthreads();             // fa2_fwd.cu's per-step barrier (the K/V ring turns over)
    }
    const long long t1 = clock64();
    if (tid == 0) cycles[blockIdx.x] = t1 - t0;
    float acc = 0.f;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        acc += l[mt][0] + l[mt][1];
#pragma unroll
        for (int n = 0; n < NO; ++n) acc += o[mt][n][0] + o[mt][n][1] + o[mt][n][2] + o[mt][n][3];
    }
    out[blockIdx.x * blockDim.x + tid] = acc;
}
#define FA2_LOOP_KERNEL(MODE) \
extern "C" __global__ void __launch_bounds__(WARPS * 32, 1) fa2_loop_m##MODE(float* out, int steps, long long* cycles) { \
    extern __shared__ __align__(128) unsigned char smem[]; fa2_loop_body<MODE>(out, steps, cycles, smem); }
FA2_LOOP_KERNEL(0) FA2_LOOP_KERNEL(1) FA2_LOOP_KERNEL(2)
"""
FA2_LOOP_MODES = {0: "full", 1: "gemms_only", 2: "softmax_only"}

MMA_LDSM_MODES = {0: "mma_only", 1: "ldmatrix_only", 2: "load_then_use", 3: "double_buffered",
                  4: "unrolled_load_then_use", 5: "unrolled_double_buffered"}
MMA_LDSM_MT, MMA_LDSM_NT = 2, 8
# (warps per CTA, CTAs per SM): FA-2 forward runs 4 warps at 1-2 CTAs per SM, backward 8 warps
# at 1 (the project's kernels and flash-attention's); 4 x 4 and 8 x 2 add the 4-warps-per-
# sub-partition point
MMA_LDSM_OCCUPANCY = ((4, 1), (4, 2), (8, 1), (4, 4), (8, 2))

def _time_ms(fn, warmup=3, reps=20):
    import cupy as cp
    for _ in range(warmup):
        fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def device_facts() -> dict:
    import cupy as cp
    props = cp.cuda.runtime.getDeviceProperties(0)
    return {"name": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
            "sm_count": props["multiProcessorCount"], "l2_capacity_bytes": props["l2CacheSize"],
            "clock_hz_reported": props["clockRate"] * 1e3,
            "shared_memory_per_sm_bytes": props["sharedMemPerMultiprocessor"],
            "shared_memory_per_block_bytes": props["sharedMemPerBlockOptin"],
            "dram_capacity_bytes": props["totalGlobalMem"]}


def dram_bandwidth(size_bytes: int = 4 << 30) -> dict:
    import cupy as cp
    n = size_bytes // 4
    src = cp.random.random(n, dtype=cp.float32)
    dst = cp.empty_like(src)
    ms = _time_ms(lambda: cp.copyto(dst, src))
    return {"dram_bandwidth_bytes_per_s": 2 * size_bytes / (ms * 1e-3),
            "method": f"device-to-device copy of {size_bytes / 2**30:.0f} GiB, bytes read + written, "
                      f"median of 20 CUDA-event timings"}


def l2_bandwidth(mod, sm_count: int, window_bytes: int = 16 << 20, reps: int = 50) -> dict:
    import cupy as cp
    n_vec = window_bytes // 16
    buf = cp.random.random(window_bytes // 4, dtype=cp.float32)
    sink = cp.zeros(1, dtype=cp.float32)
    k = mod.get_function("l2_read")
    grid, block = sm_count * 4, 512
    ms = _time_ms(lambda: k((grid,), (block,), (buf, cp.int64(n_vec), cp.int32(reps), sink)))
    return {"l2_bandwidth_bytes_per_s": window_bytes * reps / (ms * 1e-3),
            "method": f"{window_bytes >> 20} MiB buffer (fits L2) read {reps}x with 16-byte ld.global.cg "
                      f"by {grid} CTAs x {block} threads, median of 20"}


def tensor_rate(dtype: str = "fp16", n: int = 8192) -> dict:
    import cupy as cp
    dt = {"fp16": cp.float16}[dtype]   # cupy has no bf16 dtype; bf16 runs at the fp16 rate
    a = cp.random.standard_normal((n, n), dtype=cp.float32).astype(dt)
    b = cp.random.standard_normal((n, n), dtype=cp.float32).astype(dt)
    ms = _time_ms(lambda: cp.matmul(a, b), reps=10)
    return {"tensor_flops_per_s": 2 * n ** 3 / (ms * 1e-3),
            "method": f"cupy.matmul (cuBLAS) {n}^3 {dtype} on random normal data, median of 10"}


def exp_throughput(mod, sm_count: int, clock_hz: float, iters: int = 8192) -> dict:
    import cupy as cp
    k = mod.get_function("exp_rate")
    grid, block = sm_count, 1024          # one 1024-thread CTA per SM, alone on its SM
    out = cp.empty(grid * block, dtype=cp.float32)
    cycles = cp.zeros(grid, dtype=cp.int64)
    ms = _time_ms(lambda: k((grid,), (block,), (out, cp.int32(iters), cycles)), reps=10)
    exps_per_cta = block * iters * 8
    per_cta_cycles = float(cp.median(cycles.astype(cp.float64)))
    by_events = exps_per_cta * grid / (ms * 1e-3) / sm_count / clock_hz
    return {"exp_per_clock_per_sm": exps_per_cta / per_cta_cycles,
            "exp_per_clock_per_sm_by_events": by_events,
            "method": f"ex2.approx.ftz.f32, 8 independent chains per thread, one {block}-thread CTA "
                      f"per SM, clock64 cycles inside the CTA (cross-check: CUDA-event time at the "
                      f"reported {clock_hz / 1e6:.0f} MHz clock)"}


def mma_sync_rate(mod, sm_count: int, iters: int = 4096) -> dict:
    import cupy as cp
    k = mod.get_function("mma_sync_rate")
    grid, block = sm_count * 4, 256          # 32 warps per SM
    out = cp.empty(grid * block, dtype=cp.float32)
    ms = _time_ms(lambda: k((grid,), (block,), (out, cp.int32(iters))), reps=10)
    flops = grid * (block // 32) * iters * 8 * 2 * 16 * 8 * 16
    return {"tensor_flops_per_s": flops / (ms * 1e-3),
            "method": f"mma.sync.aligned.m16n8k16 f16->f32 from registers, 8 independent "
                      f"accumulators per warp, {grid} CTAs x {block // 32} warps, median of 10"}



def mma_ldsm_rate(sm_count: int, steps: int = 4096) -> dict:
    """mma.sync m16n8k16 throughput with ldmatrix operand reads interleaved (_MMA_LDSM_SRC),
    per clock per SM: every CTA's clock64 cycles between two barriers (median over CTAs), all
    CTAs resident at once (grid = SMs x CTAs per SM; the dynamic shared memory per CTA admits
    no more per SM). FLOP 2·16·8·16 per mma; bytes 512 per ldmatrix.x4."""
    import cupy as cp
    mod = cp.RawModule(code=_MMA_LDSM_SRC, options=("-std=c++17",))
    smem_per_sm = cp.cuda.runtime.getDeviceProperties(0)["sharedMemPerMultiprocessor"]
    rows = []
    for warps, per_sm in MMA_LDSM_OCCUPANCY:
        # the largest dynamic shared memory that still admits per_sm CTAs (1 KiB reserved each)
        smem = min(227 * 1024, smem_per_sm // per_sm - 1024 - 1024)
        grid, block = sm_count * per_sm, warps * 32
        for a_ld in (1, 0):
            for mode in MMA_LDSM_MODES:
                if mode == 0 and not a_ld:
                    continue
                k = mod.get_function(f"mma_ldsm_m{mode}_a{1 if mode == 0 else a_ld}")
                k.max_dynamic_shared_size_bytes = smem
                out = cp.empty(grid * block, dtype=cp.float32)
                cycles = cp.zeros(grid, dtype=cp.int64)
                ms = _time_ms(lambda: k((grid,), (block,), (out, cp.int32(steps), cycles),
                                        shared_mem=smem), warmup=2, reps=5)
                cyc = float(cp.median(cycles.astype(cp.float64)))
                mmas = 0 if mode == 1 else MMA_LDSM_MT * MMA_LDSM_NT * steps * warps
                ldsm = 0 if mode == 0 else (MMA_LDSM_MT * a_ld + MMA_LDSM_NT // 2) * steps * warps
                rows.append({
                    "mode": MMA_LDSM_MODES[mode], "a_from_shared": bool(a_ld or mode == 0),
                    "warps_per_cta": warps, "ctas_per_sm": per_sm,
                    "warps_per_sub_partition": warps * per_sm / 4, "steps": steps,
                    "cycles_median": cyc, "ms": ms,
                    "mma_flop_per_clock_per_sm": per_sm * mmas * 4096 / cyc,
                    "ldmatrix_bytes_per_clock_per_sm": per_sm * ldsm * 512 / cyc,
                    "clock_hz_implied": cyc / (ms * 1e-3)})
    return {"rows": rows, "mt": MMA_LDSM_MT, "nt": MMA_LDSM_NT,
            "method": f"per warp and k-step: {MMA_LDSM_MT} A ldmatrix.x4 (none when A is in "
                      f"registers) + {MMA_LDSM_NT // 2} B ldmatrix.x4 from conflict-free shared "
                      f"memory, then {MMA_LDSM_MT * MMA_LDSM_NT} mma.sync.m16n8k16 f16->f32 into "
                      f"independent accumulators; {steps} k-steps; clock64 cycles per CTA "
                      f"(median over CTAs, all resident), median of 5 launches"}



def fa2_loop_rate(sm_count: int, steps: int = 2048, d: int = 128, block_kv: int = 64) -> dict:
    """FA-2's forward inner loop from shared memory (_FA2_LOOP_SRC): cycles per KV step of a
    CTA (clock64, median over CTAs) and the CUDA-event time, for the whole loop, its GEMMs
    alone and its softmax alone, at 1 and 2 CTAs (4 warps each) per SM; block_q 128 and the
    given head dim and block_kv (fa2_fwd.cu's tilings: 128 x 64 at d 128, 128 x 128 at d 64)."""
    import cupy as cp
    mod = cp.RawModule(code=_FA2_LOOP_SRC, options=("-std=c++17", f"-DD={d}", f"-DBKV={block_kv}"))
    smem_per_sm = cp.cuda.runtime.getDeviceProperties(0)["sharedMemPerMultiprocessor"]
    rows = []
    for per_sm in (1, 2):
        smem = min(227 * 1024, smem_per_sm // per_sm - 2048)
        grid, block = sm_count * per_sm, 128
        for mode, name in FA2_LOOP_MODES.items():
            k = mod.get_function(f"fa2_loop_m{mode}")
            k.max_dynamic_shared_size_bytes = smem
            out = cp.empty(grid * block, dtype=cp.float32)
            cycles = cp.zeros(grid, dtype=cp.int64)
            ms = _time_ms(lambda: k((grid,), (block,), (out, cp.int32(steps), cycles),
                                    shared_mem=smem), warmup=3, reps=10)
            cyc = float(cp.median(cycles.astype(cp.float64)))
            a = k.attributes
            rows.append({"mode": name, "ctas_per_sm": per_sm, "steps": steps, "d": d, "block_kv": block_kv,
                         "cycles_per_step_per_cta": cyc / steps, "ms": ms,
                         "event_ns_per_step_per_sm": ms * 1e6 / steps / per_sm,
                         "num_regs": a.get("num_regs"), "local_size_bytes": a.get("local_size_bytes")})
    return {"rows": rows,
            "method": f"one KV step = 2 x 2·128·{block_kv}·{d} FLOP per CTA (4 warps, block_q 128, "
                      f"block_kv {block_kv}, d {d}), {steps} steps, data in shared memory; clock64 "
                      f"cycles per CTA (median), median of 10 CUDA-event timings"}


def fa2_loop_table(result: dict) -> str:
    lines = [f"{'mode':14} {'CTA/SM':>6} {'clk/step/CTA':>12} {'ns/step/SM':>10} {'regs':>4} {'local':>5}"]
    for r in result["rows"]:
        lines.append(f"{r['mode']:14} {r['ctas_per_sm']:6d} {r['cycles_per_step_per_cta']:12.0f} "
                     f"{r['event_ns_per_step_per_sm']:10.1f} {r['num_regs']:4d} {r['local_size_bytes']:5d}")
    return "\n".join(lines)

def mma_ldsm_table(result: dict) -> str:
    lines = [f"{'mode':26} {'A':4} {'w/CTA':>5} {'CTA/SM':>6} {'w/SMSP':>6} "
             f"{'FLOP/clk/SM':>11} {'B/clk/SM':>8} {'MHz':>6}"]
    for r in result["rows"]:
        lines.append(f"{r['mode']:26} {'smem' if r['a_from_shared'] else 'regs':4} "
                     f"{r['warps_per_cta']:5d} {r['ctas_per_sm']:6d} "
                     f"{r['warps_per_sub_partition']:6.1f} {r['mma_flop_per_clock_per_sm']:11.0f} "
                     f"{r['ldmatrix_bytes_per_clock_per_sm']:8.1f} "
                     f"{r['clock_hz_implied'] / 1e6:6.0f}")
    return "\n".join(lines)

def launch_overhead(mod, n: int = 2000) -> dict:
    k = mod.get_function("empty_kernel")
    ms = _time_ms(lambda: [k((1,), (32,), ()) for _ in range(n)], warmup=1, reps=5)
    return {"launch_overhead_s": ms * 1e-3 / n,
            "method": f"{n} back-to-back empty launches timed with CUDA events, per launch"}


ATOMIC_TILE_ROWS, ATOMIC_TILE_COLS = 128, 128     # one Br x d fp32 dQ tile (64 KiB)
ATOMIC_SHARES = (1, 4, 16, 64, 264)


def atomic_reduction(sm_count: int, ctas_per_sm: int = 2, threads: int = 256,
                     target_ms: float = 2.0) -> dict:
    """fp32 reduction throughput into L2: every CTA adds a 128 x 128 fp32 tile per rep, groups
    of `share` CTAs into the same tile at the same time (share 1: distinct addresses), in the
    layout of the dQ accumulator fragment (what fa2_bwd.cu's atomicAdd issues) and in a
    coalesced layout, against plain stores of the same pattern. Bytes are 4 per added float."""
    import cupy as cp
    mod = cp.RawModule(code=_ATOMIC_SRC, options=("-std=c++17",))
    k = mod.get_function("red_tile")
    grid = sm_count * ctas_per_sm
    tile = ATOMIC_TILE_ROWS * ATOMIC_TILE_COLS
    rows = []
    variants = [("fragment", 1, "red.f32"), ("fragment", 0, "st.f32"),
                ("coalesced", 1, "red.f32"), ("coalesced", 2, "red.v4.f32"),
                ("coalesced", 0, "st.f32")]
    layouts = {"fragment": 1, "coalesced": 0}
    for share in ATOMIC_SHARES:
        share = min(share, grid)
        n_groups = -(-grid // share)
        for layout, op, name in variants:
            buf = cp.zeros(n_groups * tile, dtype=cp.float32)

            def launch(reps):
                k((grid,), (threads,), (buf, cp.int32(tile), cp.int32(share),
                                        cp.int32(n_groups), cp.int32(reps),
                                        cp.int32(layouts[layout]), cp.int32(op)))
            probe_ms = _time_ms(lambda: launch(4), warmup=1, reps=3)
            reps = max(4, min(4096, int(4 * target_ms / max(probe_ms, 1e-3))))
            reps -= reps % n_groups if reps >= n_groups else 0
            buf.fill(0)
            launch(reps)
            total = float(buf.sum(dtype=cp.float64))
            expect = float(grid) * reps * tile if op else float(n_groups * tile)
            ok = total == expect if op else bool(cp.all(buf == 1.0))
            ms = _time_ms(lambda: launch(reps), warmup=2, reps=10)
            nbytes = grid * reps * tile * 4
            rows.append({"layout": layout, "op": name, "share": share, "ctas": grid,
                         "reps": reps, "ms": ms, "bytes_per_s": nbytes / (ms * 1e-3),
                         "checked": ok})
    return {"rows": rows,
            "method": f"{grid} CTAs x {threads} threads, each adds (red.global.add.f32) or stores "
                      f"one {ATOMIC_TILE_ROWS}x{ATOMIC_TILE_COLS} fp32 tile per rep; `share` CTAs "
                      f"target the same tile at once; bytes = 4 per float; median of 10 CUDA-event "
                      f"timings; checked: sum of the buffer (float64) equals the adds made"}


ATOMIC_SCALING_GRIDS = (1, 8, 33, 132, 264)


def atomic_scaling(grids=ATOMIC_SCALING_GRIDS, threads: int = 256, target_ms: float = 1.0) -> dict:
    """Does the fragment-layout red.f32 rate scale with the CTAs issuing it (a per-SM limit:
    issue, LSU, the SM's path to L2) or saturate (a chip-wide one: L2 slices)? The kernel of
    atomic_reduction, share 1 (every CTA its own tile, no address contention), for 1 to 2 x
    sm_count CTAs (one per SM up to sm_count: the launch spreads CTAs over SMs first), in the
    fragment layout and, for comparison, coalesced; bytes/s in all and per CTA."""
    import cupy as cp
    mod = cp.RawModule(code=_ATOMIC_SRC, options=("-std=c++17",))
    k = mod.get_function("red_tile")
    tile = ATOMIC_TILE_ROWS * ATOMIC_TILE_COLS
    rows = []
    for grid in grids:
        for layout, lay in (("fragment", 1), ("coalesced", 0)):
            buf = cp.zeros(grid * tile, dtype=cp.float32)

            def launch(reps):
                k((grid,), (threads,), (buf, cp.int32(tile), cp.int32(1), cp.int32(grid),
                                        cp.int32(reps), cp.int32(lay), cp.int32(1)))
            probe_ms = _time_ms(lambda: launch(4), warmup=1, reps=3)
            reps = max(4, min(4096, int(4 * target_ms / max(probe_ms, 1e-3))))
            reps -= reps % grid if reps >= grid else 0
            buf.fill(0)
            launch(reps)
            ok = float(buf.sum(dtype=cp.float64)) == float(grid) * reps * tile
            ms = _time_ms(lambda: launch(reps), warmup=2, reps=7)
            nbytes = grid * reps * tile * 4
            rows.append({"layout": layout, "op": "red.f32", "share": 1, "ctas": grid,
                         "reps": reps, "ms": ms, "bytes_per_s": nbytes / (ms * 1e-3),
                         "bytes_per_s_per_cta": nbytes / (ms * 1e-3) / grid, "checked": ok})
    return {"rows": rows,
            "method": f"CTAs x {threads} threads, each adds (red.global.add.f32) its own "
                      f"{ATOMIC_TILE_ROWS}x{ATOMIC_TILE_COLS} fp32 tile per rep (share 1); "
                      f"bytes = 4 per float; median of 7 CUDA-event timings"}


def atomic_table(result: dict) -> str:
    lines = [f"{'layout':10} {'op':11} {'share':>5} {'reps':>5} {'ms':>8} {'GB/s':>9} ok"]
    for r in result["rows"]:
        lines.append(f"{r['layout']:10} {r['op']:11} {r['share']:5d} {r['reps']:5d} "
                     f"{r['ms']:8.3f} {r['bytes_per_s'] / 1e9:9.1f} {r['checked']}")
    return "\n".join(lines)


def run_all() -> dict:
    import cupy as cp
    facts = device_facts()
    mod = cp.RawModule(code=_SRC, options=("--use_fast_math",))
    results = {"device": facts, "measured_on": time.strftime("%Y-%m-%d", time.gmtime())}
    results["dram"] = dram_bandwidth()
    results["l2"] = l2_bandwidth(mod, facts["sm_count"])
    results["tensor_fp16"] = tensor_rate("fp16")
    results["exp"] = exp_throughput(mod, facts["sm_count"], facts["clock_hz_reported"])
    results["launch"] = launch_overhead(mod)
    results["tensor_fp16_mma_sync"] = mma_sync_rate(mod, facts["sm_count"])
    results["atomic_reduction"] = atomic_reduction(facts["sm_count"])
    results["mma_ldsm"] = mma_ldsm_rate(facts["sm_count"])
    results["fa2_loop"] = fa2_loop_rate(facts["sm_count"])
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--only-atomics", action="store_true",
                    help="run only the fp32 atomic reduction benchmark")
    ap.add_argument("--only-mma-ldsm", action="store_true",
                    help="run only the mma.sync + ldmatrix overlap benchmark")
    ap.add_argument("--only-atomic-scaling", action="store_true",
                    help="run only the red.f32 rate vs issuing CTAs (1 to 2 x SMs)")
    args = ap.parse_args(argv)
    if args.only_atomic_scaling:
        facts = device_facts()
        results = {"device": facts, "measured_on": time.strftime("%Y-%m-%d", time.gmtime()),
                   "atomic_scaling": atomic_scaling()}
        with open(args.output, "w") as f:
            json.dump(results, f, indent=2, sort_keys=True)
        print(atomic_table(results["atomic_scaling"]))
        for r in results["atomic_scaling"]["rows"]:
            print(r["layout"], r["ctas"], f"{r['bytes_per_s_per_cta'] / 1e9:.2f} GB/s per CTA")
        return
    if args.only_mma_ldsm:
        facts = device_facts()
        results = {"device": facts, "measured_on": time.strftime("%Y-%m-%d", time.gmtime()),
                   "mma_ldsm": mma_ldsm_rate(facts["sm_count"]),
                   "fa2_loop": fa2_loop_rate(facts["sm_count"])}
        with open(args.output, "w") as f:
            json.dump(results, f, indent=2, sort_keys=True)
        print(mma_ldsm_table(results["mma_ldsm"]))
        print(fa2_loop_table(results["fa2_loop"]))
        return
    if args.only_atomics:
        facts = device_facts()
        results = {"device": facts, "measured_on": time.strftime("%Y-%m-%d", time.gmtime()),
                   "atomic_reduction": atomic_reduction(facts["sm_count"])}
        with open(args.output, "w") as f:
            json.dump(results, f, indent=2, sort_keys=True)
        print(atomic_table(results["atomic_reduction"]))
        return
    with open(args.output, "w") as f:
        json.dump(results, f, indent=2, sort_keys=True)
    print(json.dumps(results, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
