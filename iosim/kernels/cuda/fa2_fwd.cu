// FlashAttention-2 forward: one CTA per (Q block i, batch b, head h), grid (n_q, B, H), q block
// fastest — the launch shape of iosim.algorithms.fa2.forward_kernels.
//
// Where data lives:
//   Q_i      shared memory for the whole KV loop (loaded once, re-read by ldmatrix each step)
//   K_j, V_j a STAGES-deep ring of shared-memory buffers filled by cp.async: tile j+STAGES-1 is
//            in flight while tile j is computed
//   S, P     registers (the S accumulator is re-packed in place as the A operand of P·V)
//   O_i      fp32 registers, rescaled each step, normalised and written once; LSE_i written once
//
// Tiling (compile-time, from the Schedule's Tiling): IOSIM_D, IOSIM_BQ, IOSIM_BKV, IOSIM_WARPS,
// IOSIM_STAGES. Every warp owns BQ/WARPS rows of the Q block.
#include "iosim_common.cuh"

#ifndef IOSIM_D
#define IOSIM_D 128
#endif
#ifndef IOSIM_BQ
#define IOSIM_BQ 128
#endif
#ifndef IOSIM_BKV
#define IOSIM_BKV 64
#endif
#ifndef IOSIM_WARPS
#define IOSIM_WARPS 4
#endif
#ifndef IOSIM_STAGES
#define IOSIM_STAGES 2
#endif
#ifndef IOSIM_FORCE_MASK
#define IOSIM_FORCE_MASK 0
#endif
#ifndef IOSIM_O_STORE
// experiments only (scripts/experiments/o_store_h200.py): 1 O written (the kernel), 0 computed
// but not written
#define IOSIM_O_STORE 1
#endif

namespace fa2f {
constexpr int D = IOSIM_D, BQ = IOSIM_BQ, BKV = IOSIM_BKV, WARPS = IOSIM_WARPS, STAGES = IOSIM_STAGES;
constexpr int NT = WARPS * 32;
constexpr int RW = BQ / WARPS;       // Q rows per warp
constexpr int MT = RW / 16;          // 16-row MMA tiles per warp
constexpr int NS = BKV / 8;          // 8-column tiles of S
constexpr int NO = D / 8;            // 8-column tiles of O
constexpr int CD = D / 8;            // 16-byte chunks per row of Q/K/V
constexpr u32 Q_BYTES = BQ * D * 2;
constexpr u32 KV_BYTES = BKV * D * 2;
static_assert(RW % 16 == 0, "block_q / warps must be a multiple of 16");
static_assert(BKV % 16 == 0, "block_kv must be a multiple of 16");
static_assert(D % 64 == 0, "head dim 64 or 128");
static_assert(STAGES >= 1, "stages >= 1");
// compute-phase names (iosim/kernels/trace.py: NAMES["fa2_fwd"])
enum { N_S = 0, N_EXP = 1, N_PV = 2 };

}  // namespace fa2f

extern "C" __global__ void __launch_bounds__(fa2f::NT, 1)
fa2_fwd(const u16* __restrict__ Q, const u16* __restrict__ K, const u16* __restrict__ V,
        u16* __restrict__ O, float* __restrict__ LSE, int B, int Hq, int Hkv, int Nq, int Nkv,
        int causal, float scale, u64* trace, int trace_cap) {
    using namespace fa2f;
    extern __shared__ __align__(128) unsigned char smem[];
    TraceRec tr;
    tr.init(trace, trace_cap);

    const int i = blockIdx.x, b = blockIdx.y, h = blockIdx.z;
    const int hk = h / (Hq / Hkv);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int r0 = i * BQ;
    const int rows_q = min(BQ, Nq - r0);
    const int off = Nkv - Nq;                      // bottom-right causal alignment
    const int n_kv = (Nkv + BKV - 1) / BKV;
    int j_stop = n_kv;
    if (causal) {
        int last_col = r0 + rows_q - 1 + off;
        j_stop = last_col < 0 ? 0 : min(n_kv, last_col / BKV + 1);
    }
    const float scale_log2 = scale * IOSIM_LOG2E;

    const u16* q_g = Q + (((long long)b * Hq + h) * Nq + r0) * D;
    const u16* k_g = K + ((long long)b * Hkv + hk) * Nkv * D;
    const u16* v_g = V + ((long long)b * Hkv + hk) * Nkv * D;

    const u32 s_q = smem_u32(smem);
    const u32 s_kv = s_q + Q_BYTES;               // stage s: K at s_kv + 2s·KV_BYTES, V after it

    if (tid == 0) { STAMP(trace, 0); STAMP_SMID(trace); }
    // Q_i: issued with the first K/V group, waited for with it.
    load_tile<D, NT>(s_q, q_g, BQ, rows_q, tid);
    tr.tile(EV_LOAD, T_Q, b, h, i, rows_q * D * 2);

    auto issue_kv = [&](int j) {
        int st = j % STAGES;
        int valid = min(BKV, Nkv - j * BKV);
        load_tile<D, NT>(s_kv + (2 * st) * KV_BYTES, k_g + (long long)j * BKV * D, BKV, valid, tid);
        tr.tile(EV_LOAD, T_K, b, hk, j, valid * D * 2);
        load_tile<D, NT>(s_kv + (2 * st + 1) * KV_BYTES, v_g + (long long)j * BKV * D, BKV, valid, tid);
        tr.tile(EV_LOAD, T_V, b, hk, j, valid * D * 2);
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < j_stop) issue_kv(s);
        cp_async_commit();
    }

    float o[MT][NO][4];
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int n = 0; n < NO; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
        m[mt][0] = m[mt][1] = -IOSIM_INF;
        l[mt][0] = l[mt][1] = 0.f;
    }

    for (int j = 0; j < j_stop; ++j) {
        if (STAGES == 1) {
            issue_kv(j);
            cp_async_commit();
            cp_async_wait<0>();
            __syncthreads();
        } else {
            cp_async_wait<(STAGES > 1 ? STAGES - 2 : 0)>();
            __syncthreads();                       // tile j landed; buffer of tile j-1 is free
            if (j == 0 && tid == 0) STAMP(trace, 2);
            if (j + STAGES - 1 < j_stop) issue_kv(j + STAGES - 1);
            cp_async_commit();
        }
        const u32 s_k = s_kv + (2 * (j % STAGES)) * KV_BYTES;
        const u32 s_v = s_k + KV_BYTES;

        // Per-lane ldmatrix offsets, recomputed each step from an opaque lane id (so they are
        // not hoisted and kept live beside the accumulators). The swizzle XOR touches only the
        // low 3 bits of the chunk index, so stepping 16 rows or 8 chunks adds a constant: four
        // offsets per operand cover every k-step, and each ldmatrix is [register + immediate].
        u32 qoff[4], koff[4], voff[4];
        {
            int ln = lane;
            asm volatile("" : "+r"(ln));
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                qoff[c] = s_q + swz(warp * RW + (ln & 15), c * 2 + (ln >> 4), CD);
                koff[c] = s_k + swz((ln & 7) + ((ln >> 4) << 3), c * 2 + ((ln >> 3) & 1), CD);
                voff[c] = s_v + swz((ln & 7) + (((ln >> 3) & 1) << 3), c * 2 + (ln >> 4), CD);
            }
        }

        // ---- S = Q_i K_jᵀ (tensor cores; Q and K fragments by ldmatrix from swizzled smem)
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
                        qoff[kk & 3] + mt * 16 * CD * 16 + (kk >> 2) * 128);
#pragma unroll
            for (int np = 0; np < NS / 2; ++np) {
                u32 b0, b1, b2, b3;
                ldsm_x4(b0, b1, b2, b3, koff[kk & 3] + np * 16 * CD * 16 + (kk >> 2) * 128);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma16816(s[mt][2 * np], a[mt], b0, b1);
                    mma16816(s[mt][2 * np + 1], a[mt], b2, b3);
                }
            }
        }
        tr.op(EV_MMA, N_S);

        // ---- mask (causal diagonal blocks and the ragged last block only)
        const int c0 = j * BKV;
        // IOSIM_FORCE_MASK (experiments only: scripts/experiments/mask_cost_h200.py): every step
        // runs the mask's compares and selects (a non-causal problem masks nothing)
        const bool need_mask = IOSIM_FORCE_MASK || (c0 + BKV > Nkv) || (causal && c0 + BKV - 1 > r0 + off);
        if (need_mask) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int n = 0; n < NS; ++n)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        int row = r0 + warp * RW + mt * 16 + (lane >> 2) + (e >> 1) * 8;
                        int col = c0 + n * 8 + (lane & 3) * 2 + (e & 1);
                        if (col >= Nkv || (causal && col > row + off)) s[mt][n][e] = -IOSIM_INF;
                    }
        }

        // ---- online softmax: rows are spread over quads of lanes
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                float mx = m[mt][hf];
#pragma unroll
                for (int n = 0; n < NS; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * hf], s[mt][n][2 * hf + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
                const float m_use = (mx == -IOSIM_INF) ? 0.f : mx * scale_log2;
                const float alpha = fast_exp2(m[mt][hf] * scale_log2 - m_use);
                m[mt][hf] = mx;
                float sum = 0.f;
#pragma unroll
                for (int n = 0; n < NS; ++n) {
                    float p0 = fast_exp2(s[mt][n][2 * hf] * scale_log2 - m_use);
                    float p1 = fast_exp2(s[mt][n][2 * hf + 1] * scale_log2 - m_use);
                    s[mt][n][2 * hf] = p0;
                    s[mt][n][2 * hf + 1] = p1;
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

        // ---- O += P V_j: P straight from registers, V by transposing ldmatrix
#pragma unroll
        for (int kk = 0; kk < BKV / 16; ++kk) {
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
                ldsm_x4_t(b0, b1, b2, b3, voff[dp & 3] + kk * 16 * CD * 16 + (dp >> 2) * 128);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma16816(o[mt][2 * dp], a[mt], b0, b1);
                    mma16816(o[mt][2 * dp + 1], a[mt], b2, b3);
                }
            }
        }
        tr.op(EV_MMA, N_PV);
        if (STAGES == 1) __syncthreads();          // the single buffer is refilled next step
    }
    if (tid == 0) STAMP(trace, 4);
    cp_async_wait<0>();

    // ---- epilogue: O_i = O / l written once, LSE_i = m·scale + ln l (+inf for rows that see
    // no key at all; their O is 0)
    u16* o_g = O + (((long long)b * Hq + h) * Nq + r0) * D;
    float* lse_g = LSE + ((long long)b * Hq + h) * Nq + r0;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            float lsum = l[mt][hf];
            lsum += __shfl_xor_sync(0xffffffff, lsum, 1);
            lsum += __shfl_xor_sync(0xffffffff, lsum, 2);
            const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
            const int row = warp * RW + mt * 16 + (lane >> 2) + hf * 8;
            if (row < rows_q) {
#pragma unroll
                for (int n = 0; n < NO; ++n) {
                    u32 v = pack2(o[mt][n][2 * hf] * inv, o[mt][n][2 * hf + 1] * inv);
                    if (IOSIM_O_STORE || v == 0x7fff7fffu)
                        *(u32*)(o_g + (long long)row * D + n * 8 + (lane & 3) * 2) = v;
                }
                if ((lane & 3) == 0)
                    lse_g[row] = lsum > 0.f ? m[mt][hf] * scale + __logf(lsum) : IOSIM_INF;
            }
        }
    tr.tile(EV_STORE, T_O, b, h, i, rows_q * D * 2);
    tr.tile(EV_STORE, T_LSE, b, h, i, rows_q * 4);
    if (tid == 0) STAMP(trace, 5);
    if (tid == NT - 1) STAMP(trace, 6);
    tr.finish();
}
