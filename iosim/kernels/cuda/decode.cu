// Flash-Decoding: split-KV attention for a few query tokens against a long KV cache, plus the
// combine kernel. The launch shape of iosim.algorithms.flash_decoding (see NOTES-kernel.md /
// that module's docstring).
//
// fd_split: one CTA per (split s, KV head hk, batch b), grid (splits, Hkv, B), s fastest.
//   GQA packing: the G = Hq/Hkv query heads of KV head hk, each with Sq query tokens, form one
//   Q tile of ROWS = G·Sq rows (row = g·Sq + t: contiguous in the [B][Hq][Sq][D] layout),
//   padded to 16·MT rows for the tensor cores. The CTA walks the KV tiles of its split:
//     n_tiles = ceil(len_b / BKV), per_split = ceil(n_tiles / splits),
//     tiles [s·per_split, min(n_tiles, (s+1)·per_split))   (may be empty)
//   through a STAGES-deep ring of K/V tiles filled by 16-byte cp.async (tile j+STAGES-1 in
//   flight while tile j is computed). Each of the 4 warps takes 16 of a tile's BKV rows
//   (BKV = 16·WARPS) and keeps its own online-softmax state (m, l, O in fp32 registers); the
//   warps are merged through shared memory at the end (the same equations as the combine).
//   splits == 1: O (16-bit) and LSE are written directly. splits > 1: O_partial[s][b][h][t][:]
//   (fp32, already divided by its l) and LSE_partial[s][b][h][t] = m·scale + ln l
//   (-inf for a split that saw no key).
//
// KV cache, contiguous (IOSIM_PAGE 0): K, V [B][Hkv][Nmax][D], sequence b has len_b ≤ Nmax keys.
// KV cache, paged (IOSIM_PAGE = P, a power of two): K, V [pages][Hkv][P][D]; token n of
//   sequence b lives in page block_table[b][n / P] at row n % P. Tile loads are split at page
//   boundaries (one cp.async group per page piece; one trace event per piece).
//
// fd_combine: one warp per query row (b, h, t); CTA = 4 warps = 4 consecutive rows of the
//   flattened [B][Hq][Sq] index; grid ceil(B·Hq·Sq / 4). LSE_max = max_k LSE_k,
//   w_k = e^{LSE_k − LSE_max}, O = Σ w_k O_k / Σ w_k, LSE = LSE_max + ln Σ w_k (the equations
//   m = max m_k, l = Σ e^{m_k−m} l_k, O = Σ e^{m_k−m} l_k O_k / l, with O_k normalised).
//
// Causal (Sq > 1, speculative decoding): query token t of sequence b sees key n iff
// n ≤ t + len_b − Sq (bottom-right aligned, as the rest of the project).
#include "iosim_common.cuh"

#ifndef IOSIM_D
#define IOSIM_D 128
#endif
#ifndef IOSIM_BKV
#define IOSIM_BKV 64
#endif
#ifndef IOSIM_STAGES
#define IOSIM_STAGES 3
#endif
#ifndef IOSIM_MT
#define IOSIM_MT 1
#endif
#ifndef IOSIM_PAGE
#define IOSIM_PAGE 0
#endif

struct __align__(8) u2 { u32 x, y; };

// read-only loads (non-coherent path), written in PTX: NVRTC gets no headers
__device__ __forceinline__ int ldg_i32(const int* p) {
    int v;
    asm volatile("ld.global.nc.s32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ float ldg_f32(const float* p) {
    float v;
    asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

// tensor ids beyond iosim_common.cuh's (iosim/kernels/trace.py: TENSORS)
#define T_OPART 17
#define T_LSEPART 18

namespace fdk {
constexpr int D = IOSIM_D, BKV = IOSIM_BKV, STAGES = IOSIM_STAGES, MT = IOSIM_MT, PAGE = IOSIM_PAGE;
constexpr int WARPS = BKV / 16;
constexpr int NT = WARPS * 32;
constexpr int QROWS = 16 * MT;     // padded Q tile rows
constexpr int NO = D / 8;          // 8-column tiles of O
constexpr int CD = D / 8;          // 16-byte chunks per row
constexpr u32 Q_BYTES = QROWS * D * 2;
constexpr u32 KV_BYTES = BKV * D * 2;
static_assert(BKV % 16 == 0 && WARPS >= 1 && WARPS <= 8, "block_kv = 16 x warps, 1..8 warps");
static_assert(D % 64 == 0, "head dim 64 or 128");
static_assert(STAGES >= 2, "stages >= 2");
static_assert(PAGE == 0 || (PAGE & (PAGE - 1)) == 0, "page size a power of two");
// smem for merging the warps (fp32 O + m + l per warp) must fit in the ring
static_assert((u32)WARPS * QROWS * (D + 2) * 4 <= Q_BYTES + STAGES * 2 * KV_BYTES, "merge buffer fits");
enum { N_S = 0, N_EXP = 1, N_PV = 2 };   // trace.py NAMES["fd_split"]
}  // namespace fdk

// K or V tile j (BKV rows from token j·BKV) → swizzled shared memory; rows past `valid` zeroed.
// Records one trace event per contiguous piece (one per page piece when paged).
template <int TENSOR>
__device__ __forceinline__ void fd_load_kv(u32 dst, const u16* base, const int* bt_b, int b, int hk,
                                           int Hkv, long long nmax, int j, int valid, int tid,
                                           TraceRec& tr) {
    using namespace fdk;
    for (int c = tid; c < BKV * CD; c += NT) {
        const int r = c / CD, ch = c % CD;
        const bool ok = r < valid;
        const int n = j * BKV + r;
        const u16* src;
        if (PAGE == 0) {
            src = base + (((long long)b * Hkv + hk) * nmax + n) * D + ch * 8;
        } else {
            const int page = ok ? ldg_i32(bt_b + n / (PAGE > 0 ? PAGE : 1)) : 0;
            src = base + (((long long)page * Hkv + hk) * (PAGE > 0 ? PAGE : 1) + (n & (PAGE - 1))) * D + ch * 8;
        }
        cp_async16(dst + swz(r, ch, CD), ok ? (const void*)src : (const void*)base, ok ? 16u : 0u);
    }
#ifdef IOSIM_TRACE
    if (PAGE == 0 || PAGE >= BKV) {
        const int page = PAGE == 0 ? 0 : bt_b[(j * BKV) / (PAGE > 0 ? PAGE : 1)];
        if (PAGE == 0) tr.tile(EV_LOAD, TENSOR, b, hk, j, valid * D * 2);
        else tr.ev(EV_LOAD, TENSOR, 4, b, hk, j, page, valid * D * 2);
    } else {
        for (int r0 = 0; r0 < valid; r0 += (PAGE > 0 ? PAGE : 1)) {
            const int rows = min(PAGE, valid - r0);
            tr.ev(EV_LOAD, TENSOR, 4, b, hk, j, bt_b[(j * BKV + r0) / (PAGE > 0 ? PAGE : 1)], rows * D * 2);
        }
    }
#endif
}

extern "C" __global__ void __launch_bounds__(fdk::NT)
fd_split(const u16* __restrict__ Q, const u16* __restrict__ K, const u16* __restrict__ V,
         const int* __restrict__ seqlens, const int* __restrict__ block_table, int bt_stride,
         u16* __restrict__ O, float* __restrict__ LSE, float* __restrict__ Opart,
         float* __restrict__ LSEpart, int B, int Hq, int Hkv, int Sq, int Nmax, int splits,
         int causal, float scale, u64* trace, int trace_cap) {
    using namespace fdk;
    extern __shared__ __align__(128) unsigned char smem[];
    TraceRec tr;
    tr.init(trace, trace_cap);

    const int s = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
    const int G = Hq / Hkv;
    const int rows = G * Sq;                     // ≤ QROWS (checked by the launcher)
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int len = seqlens[b];
    const int n_tiles = (len + BKV - 1) / BKV;
    const int per = (n_tiles + splits - 1) / splits;
    const int j0 = min(n_tiles, s * per), j1 = min(n_tiles, (s + 1) * per);
    const float scale_log2 = scale * IOSIM_LOG2E;
    const int* bt_b = block_table + (long long)b * bt_stride;

    const u32 s_q = smem_u32(smem);
    const u32 s_kv = s_q + Q_BYTES;

    // Q tile: the G·Sq rows of this KV group, contiguous in memory
    const u16* q_g = Q + ((long long)b * Hq + hk * G) * Sq * D;
    load_tile<D, NT>(s_q, q_g, QROWS, rows, tid);
    tr.tile(EV_LOAD, T_Q, b, hk, 0, rows * D * 2);

    auto issue = [&](int j) {
        const int st = (j - j0) % STAGES;
        const int valid = min(BKV, len - j * BKV);
        fd_load_kv<T_K>(s_kv + (2 * st) * KV_BYTES, K, bt_b, b, hk, Hkv, Nmax, j, valid, tid, tr);
        fd_load_kv<T_V>(s_kv + (2 * st + 1) * KV_BYTES, V, bt_b, b, hk, Hkv, Nmax, j, valid, tid, tr);
    };
#pragma unroll
    for (int p = 0; p < STAGES - 1; ++p) {
        if (j0 + p < j1) issue(j0 + p);
        cp_async_commit();
    }

    float o[MT][NO][4];
    float m[MT][2], l[MT][2];
    u32 qa[MT][D / 16][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int n = 0; n < NO; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
        m[mt][0] = m[mt][1] = -IOSIM_INF;
        l[mt][0] = l[mt][1] = 0.f;
    }

    for (int j = j0; j < j1; ++j) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();                          // tile j landed; the buffer of j-1 is free
        if (j + STAGES - 1 < j1) issue(j + STAGES - 1);
        cp_async_commit();
        if (j == j0) {                            // Q fragments, once, into registers
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int kk = 0; kk < D / 16; ++kk)
                    ldsm_x4(qa[mt][kk][0], qa[mt][kk][1], qa[mt][kk][2], qa[mt][kk][3],
                            s_q + swz(mt * 16 + (lane & 15), kk * 2 + (lane >> 4), CD));
        }
        const int st = (j - j0) % STAGES;
        const u32 s_k = s_kv + (2 * st) * KV_BYTES;
        const u32 s_v = s_k + KV_BYTES;

        // ---- S = Q K_wᵀ for this warp's 16 keys (two 8-column MMA tiles)
        float sc[MT][2][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int n = 0; n < 2; ++n) sc[mt][n][0] = sc[mt][n][1] = sc[mt][n][2] = sc[mt][n][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            u32 b0, b1, b2, b3;
            ldsm_x4(b0, b1, b2, b3,
                    s_k + swz(warp * 16 + (lane & 7) + ((lane >> 4) << 3), kk * 2 + ((lane >> 3) & 1), CD));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma16816(sc[mt][0], qa[mt][kk], b0, b1);
                mma16816(sc[mt][1], qa[mt][kk], b2, b3);
            }
        }
        tr.op(EV_MMA, N_S);

        // ---- mask: keys past len (ragged last tile), causal for Sq > 1, padded rows
        const int c0 = j * BKV + warp * 16;
        const bool need_mask = (j * BKV + BKV > len) || (causal && Sq > 1);
        if (need_mask) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int n = 0; n < 2; ++n)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int row = mt * 16 + (lane >> 2) + (e >> 1) * 8;
                        const int col = c0 + n * 8 + (lane & 3) * 2 + (e & 1);
                        const int t = row % Sq;
                        if (col >= len || (causal && col > t + len - Sq)) sc[mt][n][e] = -IOSIM_INF;
                    }
        }

        // ---- online softmax (rows over quads of lanes)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                float mx = fmaxf(m[mt][hf], fmaxf(fmaxf(sc[mt][0][2 * hf], sc[mt][0][2 * hf + 1]),
                                                  fmaxf(sc[mt][1][2 * hf], sc[mt][1][2 * hf + 1])));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
                const float m_use = (mx == -IOSIM_INF) ? 0.f : mx * scale_log2;
                const float alpha = fast_exp2(m[mt][hf] * scale_log2 - m_use);
                m[mt][hf] = mx;
                float sum = 0.f;
#pragma unroll
                for (int n = 0; n < 2; ++n) {
                    const float p0 = fast_exp2(sc[mt][n][2 * hf] * scale_log2 - m_use);
                    const float p1 = fast_exp2(sc[mt][n][2 * hf + 1] * scale_log2 - m_use);
                    sc[mt][n][2 * hf] = p0;
                    sc[mt][n][2 * hf + 1] = p1;
                    sum += p0 + p1;
                }
                l[mt][hf] = l[mt][hf] * alpha + sum;
#pragma unroll
                for (int n = 0; n < NO; ++n) {
                    o[mt][n][2 * hf] *= alpha;
                    o[mt][n][2 * hf + 1] *= alpha;
                }
            }
        tr.op(EV_EXP, N_EXP);

        // ---- O += P V_w: P from registers, V rows of this warp by transposing ldmatrix
        u32 pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            pa[mt][0] = pack2(sc[mt][0][0], sc[mt][0][1]);
            pa[mt][1] = pack2(sc[mt][0][2], sc[mt][0][3]);
            pa[mt][2] = pack2(sc[mt][1][0], sc[mt][1][1]);
            pa[mt][3] = pack2(sc[mt][1][2], sc[mt][1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < NO / 2; ++dp) {
            u32 b0, b1, b2, b3;
            ldsm_x4_t(b0, b1, b2, b3,
                      s_v + swz(warp * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), dp * 2 + (lane >> 4), CD));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma16816(o[mt][2 * dp], pa[mt], b0, b1);
                mma16816(o[mt][2 * dp + 1], pa[mt], b2, b3);
            }
        }
        tr.op(EV_MMA, N_PV);
    }
    cp_async_wait<0>();
    __syncthreads();                              // ring free: reuse it for the warp merge

    // ---- merge the warps: each writes (m, l, O) for its rows, fp32
    float* mb = (float*)smem;                                  // [WARPS][QROWS] m (log2 units)
    float* lb = mb + WARPS * QROWS;                            // [WARPS][QROWS] l
    float* ob = lb + WARPS * QROWS;                            // [WARPS][QROWS][D] O
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            float ls = l[mt][hf];
            ls += __shfl_xor_sync(0xffffffff, ls, 1);
            ls += __shfl_xor_sync(0xffffffff, ls, 2);
            const int row = mt * 16 + (lane >> 2) + hf * 8;
            if ((lane & 3) == 0) {
                mb[warp * QROWS + row] = m[mt][hf] == -IOSIM_INF ? -IOSIM_INF : m[mt][hf] * scale_log2;
                lb[warp * QROWS + row] = ls;
            }
#pragma unroll
            for (int n = 0; n < NO; ++n)
                *(f2*)(ob + ((long long)warp * QROWS + row) * D + n * 8 + (lane & 3) * 2) =
                    f2{o[mt][n][2 * hf], o[mt][n][2 * hf + 1]};
        }
    __syncthreads();

    // each thread: one row, 4 consecutive columns per step
    const bool direct = splits == 1;
    for (int c = tid; c < rows * (D / 4); c += NT) {
        const int row = c / (D / 4), col = (c % (D / 4)) * 4;
        float mm = -IOSIM_INF;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) mm = fmaxf(mm, mb[w * QROWS + row]);
        const float mu = mm == -IOSIM_INF ? 0.f : mm;
        float L = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int w = 0; w < WARPS; ++w) {
            const float e = fast_exp2(mb[w * QROWS + row] - mu);
            L += e * lb[w * QROWS + row];
            const f4 v = *(const f4*)(ob + ((long long)w * QROWS + row) * D + col);
            acc[0] += e * v.x; acc[1] += e * v.y; acc[2] += e * v.z; acc[3] += e * v.w;
        }
        const float inv = L > 0.f ? 1.f / L : 0.f;
        const float lse = L > 0.f ? (mu + __log2f(L)) * 0.69314718055994531f : -IOSIM_INF;
        const long long grow = ((long long)b * Hq + hk * G) * Sq + row;   // [B][Hq][Sq] row index
        if (direct) {
            u2 v;
            v.x = pack2(acc[0] * inv, acc[1] * inv);
            v.y = pack2(acc[2] * inv, acc[3] * inv);
            *(u2*)(O + grow * D + col) = v;
            if (col == 0) LSE[grow] = L > 0.f ? lse : IOSIM_INF;
        } else {
            const long long prow = (long long)s * B * Hq * Sq + grow;
            *(f4*)(Opart + prow * D + col) = f4{acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv};
            if (col == 0) LSEpart[prow] = lse;
        }
    }
    if (direct) {
        tr.tile(EV_STORE, T_O, b, hk, 0, rows * D * 2);
        tr.tile(EV_STORE, T_LSE, b, hk, 0, rows * 4);
    } else {
        tr.tile(EV_STORE, T_OPART, s, b, hk, rows * D * 4);
        tr.tile(EV_STORE, T_LSEPART, s, b, hk, rows * 4);
    }
    tr.finish();
}

__device__ __forceinline__ f4 ldg_f4(const float* p) {
    f4 v;
    asm volatile("ld.global.nc.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}

// ---- combine: one warp per query row, lanes over D (4 fp32 = 16 bytes each for D = 128)
#define FD_CROWS 4
extern "C" __global__ void __launch_bounds__(32 * FD_CROWS)
fd_combine(const float* __restrict__ Opart, const float* __restrict__ LSEpart, u16* __restrict__ O,
           float* __restrict__ LSE, int total_rows, int splits, u64* trace, int trace_cap) {
    using namespace fdk;
    TraceRec tr;
    tr.init(trace, trace_cap);
    constexpr int PER = D / 32;                   // columns per lane (4 for d128, 2 for d64)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = blockIdx.x * FD_CROWS;
    const int nrows = min(FD_CROWS, total_rows - row0);
    const int row = row0 + warp;
    tr.tile(EV_LOAD, T_LSEPART, blockIdx.x, 0, 0, nrows * splits * 4);
    tr.tile(EV_LOAD, T_OPART, blockIdx.x, 0, 0, nrows * splits * D * 4);
    if (row < total_rows) {
        float mx = -IOSIM_INF;
        for (int k = 0; k < splits; ++k) mx = fmaxf(mx, ldg_f32(LSEpart + (long long)k * total_rows + row));
        const float mu = mx == -IOSIM_INF ? 0.f : mx;
        float wsum = 0.f, acc[PER];
#pragma unroll
        for (int e = 0; e < PER; ++e) acc[e] = 0.f;
        for (int k = 0; k < splits; ++k) {
            const float w = __expf(ldg_f32(LSEpart + (long long)k * total_rows + row) - mu);
            wsum += w;
            const float* src = Opart + ((long long)k * total_rows + row) * D + lane * PER;
            if (PER == 4) {
                const f4 v = ldg_f4(src);
                acc[0] += w * v.x; acc[1] += w * v.y; acc[2] += w * v.z; acc[3] += w * v.w;
            } else {
#pragma unroll
                for (int e = 0; e < PER; ++e) acc[e] += w * ldg_f32(src + e);
            }
        }
        const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
#pragma unroll
        for (int e = 0; e < PER; e += 2)
            *(u32*)(O + (long long)row * D + lane * PER + e) = pack2(acc[e] * inv, acc[e + 1] * inv);
        if (lane == 0) LSE[row] = wsum > 0.f ? mu + __logf(wsum) : IOSIM_INF;
    }
    tr.tile(EV_STORE, T_O, blockIdx.x, 0, 0, nrows * D * 2);
    tr.tile(EV_STORE, T_LSE, blockIdx.x, 0, 0, nrows * 4);
    tr.finish();
}
