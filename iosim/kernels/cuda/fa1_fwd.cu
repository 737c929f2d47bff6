// FlashAttention-1 forward (Dao et al. 2022, Algorithm 1), as iosim.algorithms.fa1: one CTA
// per (batch b, query head h), grid (B, H).
//
//   init      O = 0, l = 0, m = −∞ written to global memory, one Br-row block at a time
//   for j     K_j, V_j → shared memory, kept for the whole inner loop
//     for i   Q_i, O_i, l_i, m_i → shared memory (global → SM at EVERY step);
//             S = Q_i K_jᵀ, m̃ = rowmax, P̃ = exp(S − m̃), l̃ = rowsum, P̃ V_j (tensor cores);
//             m_new, l_new; O_i ← (l_i e^{m_i−m_new} O_i + e^{m̃−m_new} P̃V_j) / l_new;
//             O_i, l_i, m_i → global memory (SM → global at EVERY step)
//
// Inside a step, S is produced in CHK-column chunks with a running max (the same FLOPs and
// the same m̃, l̃, P̃V as one Br×Bc tile; it keeps the S chunk and the P̃V accumulator within
// the register budget of any Br×Bc). A warp owns 16·MT rows; when the CTA has more warps than
// 16-row tiles, WN warps split a row tile's chunks and merge their (m, l, P̃V) through a
// small static shared buffer. m and l are kept in units of the scaled score (S·scale).
//
// Tiling (compile time): IOSIM_D, IOSIM_BQ (Br), IOSIM_BKV (Bc), IOSIM_WARPS; stages = 1.
#include "iosim_common.cuh"

#ifndef IOSIM_D
#define IOSIM_D 128
#endif
#ifndef IOSIM_BQ
#define IOSIM_BQ 128
#endif
#ifndef IOSIM_BKV
#define IOSIM_BKV 224
#endif
#ifndef IOSIM_WARPS
#define IOSIM_WARPS 8
#endif

namespace fa1f {
constexpr int D = IOSIM_D, BQ = IOSIM_BQ, BKV = IOSIM_BKV, WARPS = IOSIM_WARPS;
constexpr int NT = WARPS * 32;
constexpr int WM = (WARPS < BQ / 16 ? WARPS : BQ / 16);   // warps along rows
constexpr int WN = WARPS / WM;                             // warps sharing a row tile
constexpr int MT = BQ / 16 / WM;
constexpr int CHK = (BKV % 64 == 0) ? 64 : ((BKV % 32 == 0) ? 32 : 16);
constexpr int NCH = BKV / CHK;
constexpr int NS = CHK / 8, NO = D / 8, CD = D / 8;
constexpr u32 KV_BYTES = BKV * D * 2, Q_BYTES = BQ * D * 2;
static_assert(BQ % (16 * WM) == 0 && WARPS % WM == 0, "warp layout");
static_assert(BKV % 16 == 0, "Bc multiple of 16");
static_assert(D % 64 == 0, "head dim 64 or 128");
enum { N_S = 0, N_EXP = 1, N_PV = 2 };
constexpr int XROWS = 16 * MT;                              // rows per row tile
constexpr int XN = (WN > 1) ? (WN - 1) * WM * XROWS * (D + 2) : 1;

}  // namespace fa1f

extern "C" __global__ void __launch_bounds__(fa1f::NT, 1)
fa1_fwd(const u16* __restrict__ Q, const u16* __restrict__ K, const u16* __restrict__ V,
        u16* __restrict__ O, float* __restrict__ Lst, float* __restrict__ Mst, int B, int Hq, int Hkv,
        int Nq, int Nkv, int causal, float scale, u64* trace, int trace_cap) {
    using namespace fa1f;
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ float xch[XN];                              // cross-warp merge (WN > 1 only)
    TraceRec tr;
    tr.init(trace, trace_cap);

    const int b = blockIdx.x, h = blockIdx.y;
    const int hk = h / (Hq / Hkv);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = warp % WM, wn = warp / WM;
    const int off = Nkv - Nq;
    const int n_q = (Nq + BQ - 1) / BQ, n_kv = (Nkv + BKV - 1) / BKV;
    const float scale_log2 = scale * IOSIM_LOG2E;

    const long long head_q = ((long long)b * Hq + h) * Nq;
    const u16* q_g = Q + head_q * D;
    u16* o_g = O + head_q * D;
    float* l_g = Lst + head_q;
    float* m_g = Mst + head_q;
    const u16* k_g = K + ((long long)b * Hkv + hk) * Nkv * D;
    const u16* v_g = V + ((long long)b * Hkv + hk) * Nkv * D;

    // shared memory: K_j, V_j | Q_i, O_i | l_i, m_i (fp32)
    const u32 s_k = smem_u32(smem), s_v = s_k + KV_BYTES, s_q = s_v + KV_BYTES, s_o = s_q + Q_BYTES;
    const u32 s_l = s_o + Q_BYTES, s_m = s_l + BQ * 4;
    const float* l_s = (const float*)(smem + 2 * KV_BYTES + 2 * Q_BYTES);
    const float* m_s = l_s + BQ;

    // ---- init: O = 0, l = 0, m = −∞ in global memory (Algorithm 1, line 2)
    for (int i = 0; i < n_q; ++i) {
        const int rows = min(BQ, Nq - i * BQ);
        for (int e = tid; e < rows * D / 2; e += NT) *(u32*)(o_g + (long long)i * BQ * D + 2 * e) = 0u;
        tr.tile(EV_STORE, T_O, b, h, i, rows * D * 2);
        for (int e = tid; e < rows; e += NT) l_g[i * BQ + e] = 0.f;
        tr.tile(EV_STORE, T_L, b, h, i, rows * 4);
        for (int e = tid; e < rows; e += NT) m_g[i * BQ + e] = -IOSIM_INF;
        tr.tile(EV_STORE, T_M, b, h, i, rows * 4);
    }
    __threadfence_block();
    __syncthreads();

    for (int j = 0; j < n_kv; ++j) {
        const int c0 = j * BKV;
        const int rows_kv = min(BKV, Nkv - c0);
        load_tile<D, NT>(s_k, k_g + (long long)c0 * D, BKV, rows_kv, tid);
        tr.tile(EV_LOAD, T_K, b, hk, j, rows_kv * D * 2);
        load_tile<D, NT>(s_v, v_g + (long long)c0 * D, BKV, rows_kv, tid);
        tr.tile(EV_LOAD, T_V, b, hk, j, rows_kv * D * 2);
        cp_async_commit();

        int i_first = 0;
        if (causal)
            while (i_first < n_q && min(Nq, (i_first + 1) * BQ) - 1 + off < c0) ++i_first;

        for (int i = i_first; i < n_q; ++i) {
            const int r0 = i * BQ, rows_q = min(BQ, Nq - r0);
            load_tile<D, NT>(s_q, q_g + (long long)r0 * D, BQ, rows_q, tid);
            tr.tile(EV_LOAD, T_Q, b, h, i, rows_q * D * 2);
            load_tile<D, NT>(s_o, o_g + (long long)r0 * D, BQ, rows_q, tid);
            tr.tile(EV_LOAD, T_O, b, h, i, rows_q * D * 2);
            load_rowstat<BQ, NT>(s_l, l_g + r0, rows_q, tid);
            tr.tile(EV_LOAD, T_L, b, h, i, rows_q * 4);
            load_rowstat<BQ, NT>(s_m, m_g + r0, rows_q, tid);
            tr.tile(EV_LOAD, T_M, b, h, i, rows_q * 4);
            cp_async_commit();
            cp_async_wait<0>();
            __syncthreads();

            const bool need_mask = (c0 + BKV > Nkv) || (causal && c0 + BKV - 1 > r0 + off);
            float o[MT][NO][4], mr[MT][2], lr[MT][2];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
                for (int n = 0; n < NO; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
                mr[mt][0] = mr[mt][1] = -IOSIM_INF;
                lr[mt][0] = lr[mt][1] = 0.f;
            }
            const int rbase = wm * XROWS;
            for (int ch = wn; ch < NCH; ch += WN) {
                float s[MT][NS][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int n = 0; n < NS; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
                for (int kk = 0; kk < D / 16; ++kk) {
                    u32 a[MT][4];
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt)
                        ldsm_x4(a[mt][0], a[mt][1], a[mt][2], a[mt][3],
                                s_q + swz(rbase + mt * 16 + (lane & 15), kk * 2 + (lane >> 4), CD));
#pragma unroll
                    for (int np = 0; np < NS / 2; ++np) {
                        u32 b0, b1, b2, b3;
                        ldsm_x4(b0, b1, b2, b3,
                                s_k + swz(ch * CHK + np * 16 + (lane & 7) + ((lane >> 4) << 3), kk * 2 + ((lane >> 3) & 1), CD));
#pragma unroll
                        for (int mt = 0; mt < MT; ++mt) {
                            mma16816(s[mt][2 * np], a[mt], b0, b1);
                            mma16816(s[mt][2 * np + 1], a[mt], b2, b3);
                        }
                    }
                }
                if (ch == wn) tr.op(EV_MMA, N_S);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf) {
                        const int row = r0 + rbase + mt * 16 + (lane >> 2) + hf * 8;
                        float mx = mr[mt][hf];
#pragma unroll
                        for (int n = 0; n < NS; ++n)
#pragma unroll
                            for (int e = 0; e < 2; ++e) {
                                const int col = c0 + ch * CHK + n * 8 + (lane & 3) * 2 + e;
                                float v = s[mt][n][2 * hf + e] * scale;
                                if (need_mask && (col >= Nkv || (causal && col > row + off))) v = -IOSIM_INF;
                                s[mt][n][2 * hf + e] = v;
                                mx = fmaxf(mx, v);
                            }
                        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
                        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
                        const float mu = (mx == -IOSIM_INF) ? 0.f : mx;
                        const float alpha = fast_exp2((mr[mt][hf] - mu) * IOSIM_LOG2E);
                        mr[mt][hf] = mx;
                        float sum = 0.f;
#pragma unroll
                        for (int n = 0; n < NS; ++n)
#pragma unroll
                            for (int e = 0; e < 2; ++e) {
                                float p = fast_exp2((s[mt][n][2 * hf + e] - mu) * IOSIM_LOG2E);
                                s[mt][n][2 * hf + e] = p;
                                sum += p;
                            }
                        lr[mt][hf] = lr[mt][hf] * alpha + sum;
#pragma unroll
                        for (int n = 0; n < NO; ++n) {
                            o[mt][n][2 * hf] *= alpha;
                            o[mt][n][2 * hf + 1] *= alpha;
                        }
                    }
                if (ch == wn) tr.op(EV_EXP, N_EXP);
#pragma unroll
                for (int kk = 0; kk < CHK / 16; ++kk) {
                    u32 a[MT][4];
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        a[mt][0] = pack2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                        a[mt][1] = pack2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                        a[mt][2] = pack2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                        a[mt][3] = pack2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
                    }
#pragma unroll
                    for (int dp = 0; dp < NO / 2; ++dp) {
                        u32 b0, b1, b2, b3;
                        ldsm_x4_t(b0, b1, b2, b3,
                                  s_v + swz(ch * CHK + kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), dp * 2 + (lane >> 4), CD));
#pragma unroll
                        for (int mt = 0; mt < MT; ++mt) {
                            mma16816(o[mt][2 * dp], a[mt], b0, b1);
                            mma16816(o[mt][2 * dp + 1], a[mt], b2, b3);
                        }
                    }
                }
            }
            tr.op(EV_MMA, N_PV);

            // ---- merge the WN column groups of a row tile (m̃, l̃, P̃V of the whole block j)
            if (WN > 1) {
                if (wn > 0) {
                    float* x = xch + ((wn - 1) * WM + wm) * XROWS * (D + 2);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                        for (int hf = 0; hf < 2; ++hf) {
                            const int rl = mt * 16 + (lane >> 2) + hf * 8;
                            float lsum = lr[mt][hf];
                            lsum += __shfl_xor_sync(0xffffffff, lsum, 1);
                            lsum += __shfl_xor_sync(0xffffffff, lsum, 2);
                            if ((lane & 3) == 0) {
                                x[rl * (D + 2) + D] = mr[mt][hf];
                                x[rl * (D + 2) + D + 1] = lsum;
                            }
#pragma unroll
                            for (int n = 0; n < NO; ++n) {
                                x[rl * (D + 2) + n * 8 + (lane & 3) * 2] = o[mt][n][2 * hf];
                                x[rl * (D + 2) + n * 8 + (lane & 3) * 2 + 1] = o[mt][n][2 * hf + 1];
                            }
                        }
                }
                __syncthreads();
            }
            if (wn == 0) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf) {
                        const int rl = mt * 16 + (lane >> 2) + hf * 8;   // row within the row tile
                        const int rq = rbase + rl;                       // row within Q_i
                        float lt = lr[mt][hf];
                        lt += __shfl_xor_sync(0xffffffff, lt, 1);
                        lt += __shfl_xor_sync(0xffffffff, lt, 2);
                        float mt_ = mr[mt][hf];
                        float pv[NO][2];
#pragma unroll
                        for (int n = 0; n < NO; ++n) { pv[n][0] = o[mt][n][2 * hf]; pv[n][1] = o[mt][n][2 * hf + 1]; }
                        for (int g = 1; g < WN; ++g) {                   // fold in the other groups
                            const float* x = xch + ((g - 1) * WM + wm) * XROWS * (D + 2) + rl * (D + 2);
                            const float mg = x[D], lg = x[D + 1];
                            const float mm = fmaxf(mt_, mg);
                            const float mu = (mm == -IOSIM_INF) ? 0.f : mm;
                            const float a1 = fast_exp2((mt_ - mu) * IOSIM_LOG2E), a2 = fast_exp2((mg - mu) * IOSIM_LOG2E);
                            lt = lt * a1 + lg * a2;
#pragma unroll
                            for (int n = 0; n < NO; ++n) {
                                pv[n][0] = pv[n][0] * a1 + x[n * 8 + (lane & 3) * 2] * a2;
                                pv[n][1] = pv[n][1] * a1 + x[n * 8 + (lane & 3) * 2 + 1] * a2;
                            }
                            mt_ = mm;
                        }
                        // m̃ = mt_, l̃ = lt, P̃V = pv: the paper's update of O_i, l_i, m_i
                        const float mi = m_s[rq], li = l_s[rq];
                        const float mnew = fmaxf(mi, mt_);
                        const float mu = (mnew == -IOSIM_INF) ? 0.f : mnew;
                        const float ei = fast_exp2((mi - mu) * IOSIM_LOG2E), et = fast_exp2((mt_ - mu) * IOSIM_LOG2E);
                        const float lnew = li * ei + lt * et;
                        const float inv = lnew > 0.f ? 1.f / lnew : 0.f;
                        if (rq < rows_q) {
#pragma unroll
                            for (int n = 0; n < NO; ++n) {
                                const int col = n * 8 + (lane & 3) * 2;
                                const u32 old = lds32(s_o + swz(rq, col / 8, CD) + (col & 7) * 2);
                                const float n0 = (li * ei * lo_f32(old) + et * pv[n][0]) * inv;
                                const float n1 = (li * ei * hi_f32(old) + et * pv[n][1]) * inv;
                                *(u32*)(o_g + (long long)(r0 + rq) * D + col) = pack2(n0, n1);
                            }
                            if ((lane & 3) == 0) {
                                l_g[r0 + rq] = lnew;
                                m_g[r0 + rq] = mnew;
                            }
                        }
                    }
            }
            tr.tile(EV_STORE, T_O, b, h, i, rows_q * D * 2);
            tr.tile(EV_STORE, T_L, b, h, i, rows_q * 4);
            tr.tile(EV_STORE, T_M, b, h, i, rows_q * 4);
            __threadfence_block();
            __syncthreads();                      // Q/O/l/m buffers and xch are refilled next step
        }
        cp_async_wait<0>();                       // (causal: K_j, V_j may have had no Q block)
        __syncthreads();
    }
    tr.finish();
}
