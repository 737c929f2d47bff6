// FlashAttention-2 backward, as iosim.algorithms.fa2.backward_kernels: four kernels.
//
//   fa2_bwd_preprocess  grid (n_q, B, Hq):  D_i = rowsum(dO_i ∘ O_i); dQaccum_i = 0
//   fa2_bwd             grid (n_kv, B, Hq): K_j, V_j and the dK_j, dV_j accumulators stay on
//                       chip; Q_i, dO_i, LSE_i, D_i stream through a STAGES-deep cp.async ring;
//                       P and dS go through shared memory (they are needed transposed);
//                       dQ_i += dS K_j is added into fp32 dQaccum with atomics
//   fa2_bwd_convert_dq  grid (n_q, B, Hq):  dQ = scale · dQaccum in the input precision
//   fa2_bwd_reduce_dkv  grid (n_kv, B, Hkv) (GQA only): dK, dV = Σ over the group's query
//                       heads of dK_expanded, dV_expanded
//
// Tiling (compile time): IOSIM_D, IOSIM_BQ, IOSIM_BKV, IOSIM_WARPS, IOSIM_STAGES for fa2_bwd;
// the elementwise kernels take their block size from the same IOSIM_BQ / IOSIM_BKV.
#include "iosim_common.cuh"

#ifndef IOSIM_D
#define IOSIM_D 128
#endif
#ifndef IOSIM_BQ
#define IOSIM_BQ 64
#endif
#ifndef IOSIM_BKV
#define IOSIM_BKV 128
#endif
#ifndef IOSIM_WARPS
#define IOSIM_WARPS 8
#endif
#ifndef IOSIM_STAGES
#define IOSIM_STAGES 2
#endif
// Measurement variants of the dQaccum update (scripts/fa2_bwd_atomics_h200.py; default 0):
//   0 atomicAdd (red.global.add.f32) of the mma accumulator fragment, as the schedule says
//   1 none: dQ is computed but not written (the stores sit behind a run-time condition that
//     never holds, so the dQ GEMM stays): the kernel without its dQaccum traffic
//   2 plain st.global.f32 of the same fragment to the same addresses (not a reduction:
//     dQaccum is wrong), the layout's cost without atomicity
#ifndef IOSIM_DQ_MODE
#define IOSIM_DQ_MODE 0
#endif
// Measurement variants of the barriers that end the P and dS phases (scripts/
// fa2_bwd_barriers_h200.py; default 0, the kernel as the schedule says): bit 0 set leaves out
// the __syncthreads after the P phase (before dV += PᵀdO), bit 1 the one after the dS phase
// (before dK += dSᵀQ). Without them the GEMMs race the other warps' shared-memory writes: the
// results are wrong, the time is what the barriers cost.
#ifndef IOSIM_PHASE_BARRIERS_OFF
#define IOSIM_PHASE_BARRIERS_OFF 0
#endif

namespace fa2b {
constexpr int D = IOSIM_D, BQ = IOSIM_BQ, BKV = IOSIM_BKV, WARPS = IOSIM_WARPS, STAGES = IOSIM_STAGES;
constexpr int NT = WARPS * 32;
constexpr int CD = D / 8;      // 16-byte chunks per row of Q, dO, K, V
constexpr int CP = BKV / 8;    // 16-byte chunks per row of P, dS
// S = Q Kᵀ and dP = dO Vᵀ: BQ × BKV over a WM1 × WN1 warp grid
constexpr int WM1 = (WARPS < BQ / 32 ? WARPS : BQ / 32), WN1 = WARPS / WM1;
constexpr int TM1 = BQ / WM1, TN1 = BKV / WN1, MT1 = TM1 / 16, NT1 = TN1 / 8;
// dV = Pᵀ dO and dK = dSᵀ Q: BKV × D
constexpr int WM2 = (WARPS < BKV / 32 ? WARPS : BKV / 32), WN2 = WARPS / WM2;
constexpr int TM2 = BKV / WM2, TN2 = D / WN2, MT2 = TM2 / 16, NT2 = TN2 / 8;
// dQ = dS K: BQ × D
constexpr int WM3 = WM1, WN3 = WARPS / WM3;
constexpr int TM3 = BQ / WM3, TN3 = D / WN3, MT3 = TM3 / 16, NT3 = TN3 / 8;
static_assert(TM1 % 16 == 0 && NT1 % 2 == 0, "S tile per warp");
static_assert(TM2 % 16 == 0 && NT2 % 2 == 0, "dK/dV tile per warp");
static_assert(TM3 % 16 == 0 && NT3 % 2 == 0, "dQ tile per warp");
static_assert(CD >= 8 && CP >= 8, "rows of at least 64 elements (swizzle)");
static_assert(WM1 * WN1 == WARPS && WM2 * WN2 == WARPS, "warp grid");

constexpr u32 KV_BYTES = BKV * D * 2, Q_BYTES = BQ * D * 2, P_BYTES = BQ * BKV * 2;
// names (iosim/kernels/trace.py: NAMES["fa2_bwd"])
enum { N_S = 0, N_P = 1, N_DV = 2, N_DP = 3, N_DK = 4, N_DQ = 5 };


// Warp-level GEMMs on swizzled shared-memory tiles. Per-lane ldmatrix offsets are computed
// at the start of each call from an opaque copy of the lane id, so the compiler cannot hoist
// them out of the Q loop and keep dozens of addresses live next to the accumulators. Stepping
// 16 rows adds a constant; stepping chunk pairs changes only the XORed low bits, so four
// offsets (c & 3) plus 128·(c >> 2) cover any chunk pair c.
__device__ __forceinline__ int opaque(int x) {
    asm volatile("" : "+r"(x));
    return x;
}
// offset of chunk pair c4 (0..3) for a lane reading row lr, chunk bit lc, in a tile of ch chunks
__device__ __forceinline__ u32 lane_off(int lr, int lc, int c4, int ch, int lane) {
    return (u32)((lr * ch + ((2 * c4 + lc) ^ (lane & 7))) * 16);
}

// C[MT×16][NTL×8] += A·Bᵀ, A stored [m][k], B stored [n][k] (S = Q Kᵀ, dP = dO Vᵀ); the warp's
// rows start at ra (A) and rb (B), multiples of 16.
template <int MT, int NTL, int K>
__device__ __forceinline__ void gemm_abt(float (&c)[MT][NTL][4], u32 sa, int ra, int ca, u32 sb, int rb, int cb,
                                         int lane_) {
    const int lane = opaque(lane_);
    u32 ao[4], bo[4];
#pragma unroll
    for (int c4 = 0; c4 < 4; ++c4) {
        ao[c4] = sa + ra * ca * 16 + lane_off(lane & 15, lane >> 4, c4, ca, lane);
        bo[c4] = sb + rb * cb * 16 + lane_off((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1, c4, cb, lane);
    }
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
        u32 a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
            ldsm_x4(a[mt][0], a[mt][1], a[mt][2], a[mt][3], ao[kk & 3] + mt * 16 * ca * 16 + (kk >> 2) * 128);
#pragma unroll
        for (int np = 0; np < NTL / 2; ++np) {
            u32 b0, b1, b2, b3;
            ldsm_x4(b0, b1, b2, b3, bo[kk & 3] + np * 16 * cb * 16 + (kk >> 2) * 128);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma16816(c[mt][2 * np], a[mt], b0, b1);
                mma16816(c[mt][2 * np + 1], a[mt], b2, b3);
            }
        }
    }
}

// C += Aᵀ·B, A stored [k][m] (warp's m from ma), B stored [k][n] (warp's n from nb): the
// dV = Pᵀ dO / dK = dSᵀ Q shape, both operands by transposing ldmatrix.
template <int MT, int NTL, int K>
__device__ __forceinline__ void gemm_atb(float (&c)[MT][NTL][4], u32 sa, int ma, int ca, u32 sb, int nb, int cb,
                                         int lane_) {
    const int lane = opaque(lane_);
    u32 ao[MT], bo[NTL / 2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
        ao[mt] = sa + swz((lane & 7) + ((lane >> 4) << 3), (ma + mt * 16) / 8 + ((lane >> 3) & 1), ca);
#pragma unroll
    for (int np = 0; np < NTL / 2; ++np)
        bo[np] = sb + swz((lane & 7) + (((lane >> 3) & 1) << 3), (nb + np * 16) / 8 + (lane >> 4), cb);
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
        u32 a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
            ldsm_x4_t(a[mt][0], a[mt][1], a[mt][2], a[mt][3], ao[mt] + kk * 16 * ca * 16);
#pragma unroll
        for (int np = 0; np < NTL / 2; ++np) {
            u32 b0, b1, b2, b3;
            ldsm_x4_t(b0, b1, b2, b3, bo[np] + kk * 16 * cb * 16);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma16816(c[mt][2 * np], a[mt], b0, b1);
                mma16816(c[mt][2 * np + 1], a[mt], b2, b3);
            }
        }
    }
}

// C += A·B, A stored [m][k] (rows from ra), B stored [k][n] (n from nb): dQ = dS K.
template <int MT, int NTL, int K>
__device__ __forceinline__ void gemm_ab(float (&c)[MT][NTL][4], u32 sa, int ra, int ca, u32 sb, int nb, int cb,
                                        int lane_) {
    const int lane = opaque(lane_);
    u32 ao[4], bo[NTL / 2];
#pragma unroll
    for (int c4 = 0; c4 < 4; ++c4) ao[c4] = sa + ra * ca * 16 + lane_off(lane & 15, lane >> 4, c4, ca, lane);
#pragma unroll
    for (int np = 0; np < NTL / 2; ++np)
        bo[np] = sb + swz((lane & 7) + (((lane >> 3) & 1) << 3), (nb + np * 16) / 8 + (lane >> 4), cb);
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
        u32 a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
            ldsm_x4(a[mt][0], a[mt][1], a[mt][2], a[mt][3], ao[kk & 3] + mt * 16 * ca * 16 + (kk >> 2) * 128);
#pragma unroll
        for (int np = 0; np < NTL / 2; ++np) {
            u32 b0, b1, b2, b3;
            ldsm_x4_t(b0, b1, b2, b3, bo[np] + kk * 16 * cb * 16);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma16816(c[mt][2 * np], a[mt], b0, b1);
                mma16816(c[mt][2 * np + 1], a[mt], b2, b3);
            }
        }
    }
}

template <int MT, int NTL>
__device__ __forceinline__ void zero(float (&c)[MT][NTL][4]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int n = 0; n < NTL; ++n) c[mt][n][0] = c[mt][n][1] = c[mt][n][2] = c[mt][n][3] = 0.f;
}
}  // namespace fa2b

// ---- main kernel --------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(fa2b::NT, 1)
fa2_bwd(const u16* __restrict__ Q, const u16* __restrict__ K, const u16* __restrict__ V,
        const u16* __restrict__ dO, const float* __restrict__ LSE, const float* __restrict__ Dst,
        float* __restrict__ dQacc, u16* __restrict__ dK, u16* __restrict__ dV,
        int B, int Hq, int Hkv, int Nq, int Nkv, int causal, float scale, u64* trace, int trace_cap) {
    using namespace fa2b;
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(16) float stat[STAGES][2][BQ];    // LSE_i, D_i per stage
    TraceRec tr;
    tr.init(trace, trace_cap);

    const int j = blockIdx.x, b = blockIdx.y, h = blockIdx.z;
    const int group = Hq / Hkv, hk = h / group;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int c0 = j * BKV;
    const int rows_kv = min(BKV, Nkv - c0);
    const int off = Nkv - Nq;
    const int n_q = (Nq + BQ - 1) / BQ;
    const float scale_log2 = scale * IOSIM_LOG2E;

    // Q blocks that attend this KV block: i_first .. n_q-1 (all of them without causality)
    int i_first = 0;
    if (causal)
        while (i_first < n_q && min(Nq, (i_first + 1) * BQ) - 1 + off < c0) ++i_first;

    const u32 s_k = smem_u32(smem), s_v = s_k + KV_BYTES, s_ring = s_v + KV_BYTES;
    const u32 s_p = s_ring + STAGES * 2 * Q_BYTES, s_ds = s_p + P_BYTES;
    const u32 s_stat = smem_u32(&stat[0][0][0]);

    const long long head_q = ((long long)b * Hq + h) * Nq;
    const u16* q_g = Q + head_q * D;
    const u16* do_g = dO + head_q * D;
    const float* lse_g = LSE + head_q;
    const float* d_g = Dst + head_q;
    float* dqa_g = dQacc + head_q * D;

    // K_j, V_j: loaded once, in the first cp.async group
    load_tile<D, NT>(s_k, K + (((long long)b * Hkv + hk) * Nkv + c0) * D, BKV, rows_kv, tid);
    tr.tile(EV_LOAD, T_K, b, hk, j, rows_kv * D * 2);
    load_tile<D, NT>(s_v, V + (((long long)b * Hkv + hk) * Nkv + c0) * D, BKV, rows_kv, tid);
    tr.tile(EV_LOAD, T_V, b, hk, j, rows_kv * D * 2);

    auto issue_q = [&](int i) {
        int st = (i - i_first) % STAGES;
        int valid = min(BQ, Nq - i * BQ);
        u32 base = s_ring + st * 2 * Q_BYTES;
        load_tile<D, NT>(base, q_g + (long long)i * BQ * D, BQ, valid, tid);
        tr.tile(EV_LOAD, T_Q, b, h, i, valid * D * 2);
        load_tile<D, NT>(base + Q_BYTES, do_g + (long long)i * BQ * D, BQ, valid, tid);
        tr.tile(EV_LOAD, T_DO, b, h, i, valid * D * 2);
        load_rowstat<BQ, NT>(s_stat + (st * 2 + 0) * BQ * 4, lse_g + i * BQ, valid, tid);
        tr.tile(EV_LOAD, T_LSE, b, h, i, valid * 4);
        load_rowstat<BQ, NT>(s_stat + (st * 2 + 1) * BQ * 4, d_g + i * BQ, valid, tid);
        tr.tile(EV_LOAD, T_D, b, h, i, valid * 4);
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (i_first + s < n_q) issue_q(i_first + s);
        cp_async_commit();
    }

    // dV_j, dK_j accumulate in registers for the whole loop
    const int wm2 = warp % WM2, wn2 = warp / WM2;
    float dv[MT2][NT2][4], dk[MT2][NT2][4];
    zero(dv);
    zero(dk);
    const int wm1 = warp % WM1, wn1 = warp / WM1;
    const int wm3 = warp % WM3, wn3 = warp / WM3;

    for (int i = i_first; i < n_q; ++i) {
        const int it = i - i_first;
        if (STAGES == 1) {
            issue_q(i);
            cp_async_commit();
            cp_async_wait<0>();
            __syncthreads();
        } else {
            cp_async_wait<(STAGES > 1 ? STAGES - 2 : 0)>();
            __syncthreads();
            if (i + STAGES - 1 < n_q) issue_q(i + STAGES - 1);
            cp_async_commit();
        }
        const int st = it % STAGES;
        const u32 s_q = s_ring + st * 2 * Q_BYTES, s_do = s_q + Q_BYTES;
        const float* lse_s = &stat[st][0][0];
        const float* d_s = &stat[st][1][0];
        const int r0 = i * BQ;
        const bool need_mask = (c0 + BKV > Nkv) || (causal && r0 + off < c0 + BKV - 1);

        // ---- S = Q_i K_jᵀ, P = exp(S·scale − LSE) → shared memory (fp16/bf16)
        {
            float s[MT1][NT1][4];
            zero(s);
            gemm_abt<MT1, NT1, D>(s, s_q, wm1 * TM1, CD, s_k, wn1 * TN1, CD, lane);
            tr.op(EV_MMA, N_S);
#pragma unroll
            for (int mt = 0; mt < MT1; ++mt)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int rl = wm1 * TM1 + mt * 16 + (lane >> 2) + hf * 8;
                    const float lse2 = lse_s[rl] * IOSIM_LOG2E;
#pragma unroll
                    for (int n = 0; n < NT1; ++n) {
                        const int cl = wn1 * TN1 + n * 8 + (lane & 3) * 2;
                        float p0 = fast_exp2(s[mt][n][2 * hf] * scale_log2 - lse2);
                        float p1 = fast_exp2(s[mt][n][2 * hf + 1] * scale_log2 - lse2);
                        if (need_mask) {
                            const int row = r0 + rl, col = c0 + cl;
                            if (col >= Nkv || (causal && col > row + off)) p0 = 0.f;
                            if (col + 1 >= Nkv || (causal && col + 1 > row + off)) p1 = 0.f;
                        }
                        sts32(s_p + swz(rl, cl / 8, CP) + (cl & 7) * 2, pack2(p0, p1));
                    }
                }
            tr.op(EV_EXP, N_P);
        }
        if (!(IOSIM_PHASE_BARRIERS_OFF & 1)) __syncthreads();

        // ---- dV_j += P_iᵀ dO_i
        gemm_atb<MT2, NT2, BQ>(dv, s_p, wm2 * TM2, CP, s_do, wn2 * TN2, CD, lane);
        tr.op(EV_MMA, N_DV);

        // ---- dP = dO_i V_jᵀ;  dS = P ∘ (dP − D_i) → shared memory
        {
            float dp[MT1][NT1][4];
            zero(dp);
            gemm_abt<MT1, NT1, D>(dp, s_do, wm1 * TM1, CD, s_v, wn1 * TN1, CD, lane);
            tr.op(EV_MMA, N_DP);
#pragma unroll
            for (int mt = 0; mt < MT1; ++mt)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int rl = wm1 * TM1 + mt * 16 + (lane >> 2) + hf * 8;
                    const float drow = d_s[rl];
#pragma unroll
                    for (int n = 0; n < NT1; ++n) {
                        const int cl = wn1 * TN1 + n * 8 + (lane & 3) * 2;
                        const u32 addr = swz(rl, cl / 8, CP) + (cl & 7) * 2;
                        const u32 p = lds32(s_p + addr);
                        sts32(s_ds + addr, pack2(lo_f32(p) * (dp[mt][n][2 * hf] - drow),
                                                 hi_f32(p) * (dp[mt][n][2 * hf + 1] - drow)));
                    }
                }
        }
        if (!(IOSIM_PHASE_BARRIERS_OFF & 2)) __syncthreads();

        // ---- dK_j += dSᵀ Q_i
        gemm_atb<MT2, NT2, BQ>(dk, s_ds, wm2 * TM2, CP, s_q, wn2 * TN2, CD, lane);
        tr.op(EV_MMA, N_DK);

        // ---- dQ_i += dS K_j, added into fp32 dQaccum (other KV blocks add to the same rows)
        {
            float dq[MT3][NT3][4];
            zero(dq);
            gemm_ab<MT3, NT3, BKV>(dq, s_ds, wm3 * TM3, CP, s_k, wn3 * TN3, CD, lane);
            tr.op(EV_MMA, N_DQ);
            const int valid = min(BQ, Nq - r0);
#pragma unroll
            for (int mt = 0; mt < MT3; ++mt)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int rl = wm3 * TM3 + mt * 16 + (lane >> 2) + hf * 8;
                    if (rl < valid) {
                        float* dst = dqa_g + (long long)(r0 + rl) * D + wn3 * TN3 + (lane & 3) * 2;
#pragma unroll
                        for (int n = 0; n < NT3; ++n) {
#if IOSIM_DQ_MODE == 0
                            atomicAdd(dst + n * 8, dq[mt][n][2 * hf]);
                            atomicAdd(dst + n * 8 + 1, dq[mt][n][2 * hf + 1]);
#elif IOSIM_DQ_MODE == 1
                            if (scale < 0.f) {       // never: the softmax scale is positive
                                dst[n * 8] = dq[mt][n][2 * hf];
                                dst[n * 8 + 1] = dq[mt][n][2 * hf + 1];
                            }
#else
                            dst[n * 8] = dq[mt][n][2 * hf];
                            dst[n * 8 + 1] = dq[mt][n][2 * hf + 1];
#endif
                        }
                    }
                }
            tr.tile(EV_STORE_REDUCE, T_DQACC, b, h, i, valid * D * 4);
        }
        if (STAGES == 1) __syncthreads();
    }
    cp_async_wait<0>();

    // ---- dK_j (scaled by the softmax scale) and dV_j written once
    const bool gqa = group > 1;
    const long long kv_head = gqa ? ((long long)b * Hq + h) : ((long long)b * Hkv + hk);
    u16* dk_g = dK + (kv_head * Nkv + c0) * D;
    u16* dv_g = dV + (kv_head * Nkv + c0) * D;
#pragma unroll
    for (int mt = 0; mt < MT2; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            const int rl = wm2 * TM2 + mt * 16 + (lane >> 2) + hf * 8;
            if (rl < rows_kv) {
#pragma unroll
                for (int n = 0; n < NT2; ++n) {
                    const int cl = wn2 * TN2 + n * 8 + (lane & 3) * 2;
                    *(u32*)(dk_g + (long long)rl * D + cl) = pack2(dk[mt][n][2 * hf] * scale, dk[mt][n][2 * hf + 1] * scale);
                    *(u32*)(dv_g + (long long)rl * D + cl) = pack2(dv[mt][n][2 * hf], dv[mt][n][2 * hf + 1]);
                }
            }
        }
    tr.tile(EV_STORE, gqa ? T_DK_EXP : T_DK, b, h, j, rows_kv * D * 2);
    tr.tile(EV_STORE, gqa ? T_DV_EXP : T_DV, b, h, j, rows_kv * D * 2);
    tr.finish();
}

// ---- elementwise kernels ------------------------------------------------------------------
// Their loads are element-wise (each thread walks its elements), so the tile events are
// recorded after the work, in program order.

// D_i = rowsum(dO_i ∘ O_i) and dQaccum_i = 0; one warp per row.
extern "C" __global__ void fa2_bwd_preprocess(const u16* __restrict__ O, const u16* __restrict__ dO,
                                              float* __restrict__ Dst, float* __restrict__ dQacc,
                                              int Hq, int Nq, int block, u64* trace, int trace_cap) {
    TraceRec tr;
    tr.init(trace, trace_cap);
    const int i = blockIdx.x, b = blockIdx.y, h = blockIdx.z;
    const int r0 = i * block, rows = min(block, Nq - r0);
    const long long base = ((long long)b * Hq + h) * Nq + r0;
    const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int r = warp; r < rows; r += warps) {
        float acc = 0.f;
        for (int c = lane * 2; c < IOSIM_D; c += 64) {
            u32 o = *(const u32*)(O + (base + r) * IOSIM_D + c);
            u32 g = *(const u32*)(dO + (base + r) * IOSIM_D + c);
            acc += lo_f32(o) * lo_f32(g) + hi_f32(o) * hi_f32(g);
        }
#pragma unroll
        for (int x = 16; x > 0; x >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, x);
        if (lane == 0) Dst[base + r] = acc;
    }
    tr.tile(EV_LOAD, T_O, b, h, i, rows * IOSIM_D * 2);
    tr.tile(EV_LOAD, T_DO, b, h, i, rows * IOSIM_D * 2);
    tr.tile(EV_STORE, T_D, b, h, i, rows * 4);
    f4* z = (f4*)(dQacc + base * IOSIM_D);
    for (int e = threadIdx.x; e < rows * IOSIM_D / 4; e += blockDim.x) z[e] = f4{0.f, 0.f, 0.f, 0.f};
    tr.tile(EV_STORE, T_DQACC, b, h, i, rows * IOSIM_D * 4);
    tr.finish();
}

// dQ_i = scale · dQaccum_i in the input precision.
extern "C" __global__ void fa2_bwd_convert_dq(const float* __restrict__ dQacc, u16* __restrict__ dQ, int Hq,
                                              int Nq, int block, float scale, u64* trace, int trace_cap) {
    TraceRec tr;
    tr.init(trace, trace_cap);
    const int i = blockIdx.x, b = blockIdx.y, h = blockIdx.z;
    const int r0 = i * block, rows = min(block, Nq - r0);
    const long long base = (((long long)b * Hq + h) * Nq + r0) * IOSIM_D;
    for (int e = threadIdx.x; e < rows * IOSIM_D / 2; e += blockDim.x) {
        f2 v = *(const f2*)(dQacc + base + 2 * e);
        *(u32*)(dQ + base + 2 * e) = pack2(v.x * scale, v.y * scale);
    }
    tr.tile(EV_LOAD, T_DQACC, b, h, i, rows * IOSIM_D * 4);
    tr.tile(EV_STORE, T_DQ, b, h, i, rows * IOSIM_D * 2);
    tr.finish();
}

// GQA: dK, dV of KV head hk = Σ_{g in group} dK_expanded, dV_expanded of query head g.
extern "C" __global__ void fa2_bwd_reduce_dkv(const u16* __restrict__ dKe, const u16* __restrict__ dVe,
                                              u16* __restrict__ dK, u16* __restrict__ dV, int Hq, int Hkv,
                                              int Nkv, int block, u64* trace, int trace_cap) {
    TraceRec tr;
    tr.init(trace, trace_cap);
    const int j = blockIdx.x, b = blockIdx.y, hk = blockIdx.z;
    const int group = Hq / Hkv;
    const int r0 = j * block, rows = min(block, Nkv - r0);
    for (int e = threadIdx.x; e < rows * IOSIM_D / 2; e += blockDim.x) {
        float k0 = 0.f, k1 = 0.f, v0 = 0.f, v1 = 0.f;
        for (int g = hk * group; g < hk * group + group; ++g) {
            const long long src = (((long long)b * Hq + g) * Nkv + r0) * IOSIM_D + 2 * e;
            u32 kx = *(const u32*)(dKe + src), vx = *(const u32*)(dVe + src);
            k0 += lo_f32(kx); k1 += hi_f32(kx); v0 += lo_f32(vx); v1 += hi_f32(vx);
        }
        const long long dst = (((long long)b * Hkv + hk) * Nkv + r0) * IOSIM_D + 2 * e;
        *(u32*)(dK + dst) = pack2(k0, k1);
        *(u32*)(dV + dst) = pack2(v0, v1);
    }
    for (int g = hk * group; g < hk * group + group; ++g) {
        tr.tile(EV_LOAD, T_DK_EXP, b, g, j, rows * IOSIM_D * 2);
        tr.tile(EV_LOAD, T_DV_EXP, b, g, j, rows * IOSIM_D * 2);
    }
    tr.tile(EV_STORE, T_DK, b, hk, j, rows * IOSIM_D * 2);
    tr.tile(EV_STORE, T_DV, b, hk, j, rows * IOSIM_D * 2);
    tr.finish();
}
