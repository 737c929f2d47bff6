// Flash-Decoding: split-KV attention for a few query tokens against a long KV cache, plus the
// combine kernel: the two kernels of iosim.algorithms.flash_decoding, whose module docstring is
// the schedule this file follows event for event (trace mode).
//
// fd_split: grid (splits, heads_kv * n_m, batch), CTA (k, hk * n_m + m, b).
//   GQA packing: the g = Hq/Hkv query heads of KV head hk and the Sq query tokens form
//   R = Sq * g rows, token-major (row r = t * g + u: token t of query head hk * g + u), cut into
//   n_m tiles of BQ = 16 * MT rows; tile m has rows_m = min(BQ, R - m * BQ) valid rows.
//   The request's KV blocks of BKV keys (a shared prefix's blocks first, then its own) are cut
//   into chunks of `per` blocks; CTA k reads blocks [k * per, (k + 1) * per) of the list (maybe
//   none). K/V tiles stream through a STAGES-deep ring filled by 16-byte cp.async: block
//   j + STAGES - 1 is issued before block j is awaited, so STAGES blocks are in flight. The CTA's warps split each tile's keys
//   (warp w: keys [w * KPW, (w + 1) * KPW), KPW = BKV / WARPS), each keeping its own online
//   softmax (m, l, O in fp32 registers) for all BQ rows; the warps are merged in shared memory
//   at the end (the combine's equations). splits == 1: O (16-bit) and LSE written directly;
//   splits > 1: O_partial (fp32, divided by its own l) and ML_partial = (m, l) per row, m in
//   units of the scaled score (empty chunk: O_partial 0, (m, l) = (-inf, 0)).
//
// KV cache, contiguous (IOSIM_PAGE 0): K, V [B][Hkv][Nmax][D]; request b's own keys 0..L_b-P-1
//   (P = prefix_len; without a prefix P = 0). Shared prefix: K_prefix, V_prefix [Hkv][P][D],
//   stored once, read by every request.
// KV cache, paged (IOSIM_PAGE = page size, a power of two): K, V [pages][Hkv][page][D]; token n
//   of request b in page block_table[b][n / page], row n % page. A tile of BKV > page rows is
//   loaded page by page (one trace event per page piece p, coordinate (b, hk, p, j)). The block
//   table is read once per tile, for K and V, ONE TILE AHEAD: lane i of every warp loads the
//   entry of tile j's page i into a register (one 4-byte load per page per warp, all issued
//   together; trace event block_table at (b, j), 4 bytes per page) right after tile j - 1's K
//   and V copies were issued, and tile j's copies take their pages from those lanes by a warp
//   shuffle when tile j is issued, a ring iteration later: the load lands while tile j - 1 is
//   awaited and computed, off the stream's critical path. Only the chunk's first own tile waits
//   for its entries (read just before its copies, in the prologue). The trace's load order is
//   the schedule's (block_table (b, j), then tile j's K and V); the table load is a prefetch.
//
// fd_combine: grid (n_m, Hkv, B), 128 threads. For each split k: ML_partial and O_partial of
//   tile (b, hk, m); m = max_k m_k, l = sum_k e^(m_k - m) l_k, O = sum_k e^(m_k - m) l_k O_k / l,
//   LSE = m + ln l. The (m_k, l_k) of all splits are first read into shared memory by all
//   threads (one round trip), then every thread accumulates its 4 columns of one row over k.
//
// Causal (Sq > 1, speculative decoding; bottom-right aligned): token t of request b attends
// key n iff n <= t + L_b - Sq; blocks past the tile's last token's last key are skipped.
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
#ifndef IOSIM_WARPS
#define IOSIM_WARPS 4
#endif
#ifndef IOSIM_MT
#define IOSIM_MT 1
#endif
#ifndef IOSIM_PAGE
#define IOSIM_PAGE 0
#endif

struct __align__(8) u2 { u32 x, y; };

// read-only loads (non-coherent path), in PTX: NVRTC gets no headers
__device__ __forceinline__ int ldg_i32(const int* p) {
    int v;
    asm volatile("ld.global.nc.s32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ f4 ldg_f4(const float* p) {   // not volatile: may be hoisted
    f4 v;
    asm("ld.global.nc.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ f2 ldg_f2(const float* p) {
    f2 v;
    asm("ld.global.nc.v2.f32 {%0,%1}, [%2];" : "=f"(v.x), "=f"(v.y) : "l"(p));
    return v;
}

// tensor ids beyond iosim_common.cuh's (iosim/kernels/trace.py: TENSORS)
#define T_OPART 17
#define T_MLPART 18
#define T_KPRE 19
#define T_VPRE 20
#define T_BT 21

namespace fdk {
constexpr int D = IOSIM_D, BKV = IOSIM_BKV, STAGES = IOSIM_STAGES, WARPS = IOSIM_WARPS;
constexpr int MT = IOSIM_MT, PAGE = IOSIM_PAGE;
constexpr int NT = WARPS * 32;
constexpr int BQ = 16 * MT;        // Q rows per tile
constexpr int KPW = BKV / WARPS;   // keys per warp per tile
constexpr int NS = KPW / 8;        // 8-column MMA tiles of S per warp
constexpr int NO = D / 8;          // 8-column tiles of O
constexpr int CD = D / 8;          // 16-byte chunks per row
constexpr int PG = PAGE > 0 ? PAGE : 1;
constexpr u32 Q_BYTES = BQ * D * 2;
constexpr u32 KV_BYTES = BKV * D * 2;
static_assert(KPW % 16 == 0, "block_kv must be a multiple of 16 x warps");
static_assert(D % 64 == 0, "head dim 64 or 128");
static_assert(STAGES >= 2, "stages >= 2");
static_assert(MT == 1 || MT == 2, "block_q 16 or 32");
static_assert(PAGE == 0 || (PAGE & (PAGE - 1)) == 0, "page size a power of two");
static_assert(PAGE == 0 || PAGE % BKV == 0 || BKV % PAGE == 0, "page and block_kv divide");
constexpr int NPT = PAGE == 0 ? 0 : (PAGE >= BKV ? 1 : BKV / PG);   // pages per tile
static_assert(NPT <= 32, "a tile's pages fit one warp's lanes (one table entry per lane)");
static_assert((BKV * CD) % NT == 0, "every thread runs the same number of copies (warp shuffles)");
static_assert((u32)WARPS * BQ * (D + 2) * 4 <= Q_BYTES + STAGES * 2 * KV_BYTES, "merge buffer fits");
enum { N_S = 0, N_EXP = 1, N_PV = 2 };   // trace.py NAMES["fd_split"]
}  // namespace fdk

// One K or V tile → swizzled shared memory, rows past `valid` zero-filled; trace events as the
// schedule has them (one per page piece when the tile spans pages).
// Paged own blocks: the physical pages of tile j, lane i of each warp holding the tile's page i
// (table entries past the tile's valid rows are not read); trace event block_table (b, j).
__device__ __forceinline__ int fd_tile_pages(const int* bt_b, int b, int j, int valid, int lane,
                                             TraceRec& tr) {
    using namespace fdk;
    const int npages = PAGE >= BKV ? 1 : (valid + PG - 1) / PG;
    const int first = (j * BKV) / PG;
    const int pg = lane < npages ? ldg_i32(bt_b + first + lane) : 0;
    tr.ev(EV_LOAD, T_BT, 2, b, j, 0, 0, npages * 4);
    return pg;
}

// Tile j of K and V together (the same rows, so one address per 16-byte chunk serves both
// copies): thread t copies chunk ch = t % CD of rows r0 + i * RSTEP (r0 = t / CD, RSTEP = NT / CD
// rows per pass, i = 0 … BKV / RSTEP - 1, unrolled). Paged: the rows of one pass lie in one page
// when RSTEP divides the page (PG % RSTEP == 0), so a thread takes its page from the table lane
// by one warp shuffle per page of the tile and reuses that page's base for all its rows in it
// (the first kernel shuffled and recomputed the 64-bit page address for every copy of K and of
// V: its traces show the copy loop at ~140 cycles per copy against ~50 contiguous).
__device__ __forceinline__ void fd_load_tile(u32 dst_k, u32 dst_v, const u16* Kb, const u16* Vb,
                                             bool prefix, int pages, int b, int hk, int Hkv,
                                             long long row_stride_base, int j, int valid, int tid,
                                             TraceRec& tr) {
    using namespace fdk;
    constexpr int RSTEP = NT / CD, NI = BKV / RSTEP;
    static_assert(NT % CD == 0 && BKV % RSTEP == 0, "whole passes of rows");
    const int r0 = tid / CD, ch = tid % CD;
    const bool paged = PAGE > 0 && !prefix;
    long long pbase = 0;                          // element offset of (page, hk, row 0)
#pragma unroll
    for (int i = 0; i < NI; ++i) {
        const int r = r0 + i * RSTEP;
        const int n = j * BKV + r;                // token within the range
        long long off;
        if (!paged) {
            off = (row_stride_base + n) * D + ch * 8;
        } else if constexpr (PG % RSTEP == 0) {
            if ((i * RSTEP) % PG == 0) {          // compile-time: a new page starts at this pass
                const int page = __shfl_sync(0xffffffff, pages, PAGE >= BKV ? 0 : (i * RSTEP) / PG);
                pbase = ((long long)page * Hkv + hk) * PG * D;
            }
            off = pbase + (long long)(n & (PG - 1)) * D + ch * 8;
        } else {                                  // pages shorter than a pass: per row
            const int page = __shfl_sync(0xffffffff, pages, r / PG);
            off = (((long long)page * Hkv + hk) * PG + (n & (PG - 1))) * D + ch * 8;
        }
        const bool ok = r < valid;
        const u32 so = swz(r, ch, CD);
        cp_async16(dst_k + so, ok ? (const void*)(Kb + off) : (const void*)Kb, ok ? 16u : 0u);
        cp_async16(dst_v + so, ok ? (const void*)(Vb + off) : (const void*)Vb, ok ? 16u : 0u);
    }
    // trace: K's events, then V's (both in this tile's cp.async group)
#pragma unroll
    for (int tv = 0; tv < 2; ++tv) {
        const int id = prefix ? (tv == 0 ? T_KPRE : T_VPRE) : (tv == 0 ? T_K : T_V);
        if (prefix) {
            tr.ev(EV_LOAD, id, 2, hk, j, 0, 0, valid * D * 2);
        } else if (PAGE == 0 || PAGE >= BKV || valid <= PAGE) {
            tr.tile(EV_LOAD, id, b, hk, j, valid * D * 2);
        } else {
            for (int p = 0; p * PG < valid; ++p)
                tr.ev(EV_LOAD, id, 4, b, hk, p, j, min(PG, valid - p * PG) * D * 2);
        }
    }
}

extern "C" __global__ void __launch_bounds__(fdk::NT)
fd_split(const u16* __restrict__ Q, const u16* __restrict__ K, const u16* __restrict__ V,
         const u16* __restrict__ Kp, const u16* __restrict__ Vp,
         const int* __restrict__ seqlens, const int* __restrict__ block_table, int bt_stride,
         u16* __restrict__ O, float* __restrict__ LSE, float* __restrict__ Opart,
         float* __restrict__ MLpart, int B, int Hq, int Hkv, int Sq, int Nmax, int prefix_len,
         int splits, int per, int n_m, int causal, float scale, u64* trace, int trace_cap) {
    using namespace fdk;
    extern __shared__ __align__(128) unsigned char smem[];
    TraceRec tr;
    tr.init(trace, trace_cap);

    const int k = blockIdx.x, m = blockIdx.y % n_m, hk = blockIdx.y / n_m, b = blockIdx.z;
    const int G = Hq / Hkv;
    const int R = G * Sq;
    const int rows_m = min(BQ, R - m * BQ);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int len = seqlens[b];
    const int own = len - prefix_len;
    const int npb = (prefix_len + BKV - 1) / BKV;               // prefix blocks
    const int pre_tail = prefix_len - (npb - 1) * BKV;
    const int nob = (own + BKV - 1) / BKV;                     // own blocks
    const int n_blocks = npb + nob;
    int g0 = min(n_blocks, k * per), g1 = min(n_blocks, (k + 1) * per);
    if (causal && prefix_len == 0) {                           // skip blocks no row sees
        const int t1 = (m * BQ + rows_m - 1) / G;
        const int last_col = t1 + len - Sq;
        const int j_stop = last_col < 0 ? 0 : min(n_blocks, last_col / BKV + 1);
        g1 = min(g1, j_stop);
        g0 = min(g0, g1);
    }
    const float scale_log2 = scale * IOSIM_LOG2E;
    const int* bt_b = block_table + (long long)b * bt_stride;

    const u32 s_q = smem_u32(smem);
    const u32 s_kv = s_q + Q_BYTES;

    if (g0 < g1) {   // Q tile m: rows r = t·g + u at Q[b][hk·g + u][t][:]
        for (int c = tid; c < BQ * CD; c += NT) {
            const int r = c / CD, ch = c % CD, rr = m * BQ + r;
            const bool ok = r < rows_m;
            const u16* src = Q + (((long long)b * Hq + hk * G + rr % G) * Sq + rr / G) * D + ch * 8;
            cp_async16(s_q + swz(r, ch, CD), ok ? (const void*)src : (const void*)Q, ok ? 16u : 0u);
        }
        tr.tile(EV_LOAD, T_Q, b, hk, m, rows_m * D * 2);
    }

    // block g of the request's list → (prefix?, block index j in its range, valid rows)
    auto valid_of = [&](int g) {
        return g < npb ? (g == npb - 1 ? pre_tail : BKV) : min(BKV, own - (g - npb) * BKV);
    };
    // paged: this lane's table entry of the next own tile to issue (read one tile ahead)
    int pages_next = 0;
    if (PAGE > 0 && g0 < g1 && g0 >= npb)        // the chunk's first own tile: read and wait
        pages_next = fd_tile_pages(bt_b, b, g0 - npb, valid_of(g0), lane, tr);
    auto issue = [&](int g) {
        const int st = (g - g0) % STAGES;
        const bool pre = g < npb;
        const int j = pre ? g : g - npb;
        const int valid = valid_of(g);
        const long long base_k = pre ? (long long)hk * prefix_len : ((long long)b * Hkv + hk) * Nmax;
        const int pages = pre ? 0 : pages_next;
        fd_load_tile(s_kv + (2 * st) * KV_BYTES, s_kv + (2 * st + 1) * KV_BYTES, pre ? Kp : K, pre ? Vp : V,
                     pre, pages, b, hk, Hkv, base_k, j, valid, tid, tr);
        // prefetch: the next own tile's entries, consumed when that tile is issued (a ring
        // iteration later); nothing waits for this load until then
        if (PAGE > 0 && g + 1 < g1 && g + 1 >= npb)
            pages_next = fd_tile_pages(bt_b, b, g + 1 - npb, valid_of(g + 1), lane, tr);
    };
#pragma unroll
    for (int p = 0; p < STAGES - 1; ++p) {
        if (g0 + p < g1) issue(g0 + p);
        cp_async_commit();
    }

    float o[MT][NO][4];
    float mx_[MT][2], l[MT][2];
    u32 qa[MT][D / 16][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int n = 0; n < NO; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
        mx_[mt][0] = mx_[mt][1] = -IOSIM_INF;
        l[mt][0] = l[mt][1] = 0.f;
    }

    for (int g = g0; g < g1; ++g) {
        // Refill first, then wait: block g+STAGES-1 goes into the buffer of block g-1 as soon
        // as every warp is done with it, so STAGES blocks are in flight while block g is
        // awaited (not STAGES-1): more bytes in flight per SM, which is what a stream needs.
        __syncthreads();                          // every warp finished block g-1
        if (g + STAGES - 1 < g1) issue(g + STAGES - 1);
        cp_async_commit();
        cp_async_wait<STAGES - 1>();              // block g landed (this thread's copies)
        __syncthreads();                          // ... and every thread's
        if (g == g0) {                            // Q fragments, once, into registers
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int kk = 0; kk < D / 16; ++kk)
                    ldsm_x4(qa[mt][kk][0], qa[mt][kk][1], qa[mt][kk][2], qa[mt][kk][3],
                            s_q + swz(mt * 16 + (lane & 15), kk * 2 + (lane >> 4), CD));
        }
        const int st = (g - g0) % STAGES;
        const u32 s_k = s_kv + (2 * st) * KV_BYTES;
        const u32 s_v = s_k + KV_BYTES;
        const bool pre = g < npb;
        const int valid = pre ? (g == npb - 1 ? pre_tail : BKV) : min(BKV, own - (g - npb) * BKV);
        // key position of this block's row 0 in the request's whole sequence (for causal)
        const int key0 = pre ? g * BKV : prefix_len + (g - npb) * BKV;

        // ---- S = Q K_wᵀ for this warp's KPW keys
        float sc[MT][NS][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int n = 0; n < NS; ++n) sc[mt][n][0] = sc[mt][n][1] = sc[mt][n][2] = sc[mt][n][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
            for (int np = 0; np < NS / 2; ++np) {
                u32 b0, b1, b2, b3;
                ldsm_x4(b0, b1, b2, b3, s_k + swz(warp * KPW + np * 16 + (lane & 7) + ((lane >> 4) << 3),
                                                  kk * 2 + ((lane >> 3) & 1), CD));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma16816(sc[mt][2 * np], qa[mt][kk], b0, b1);
                    mma16816(sc[mt][2 * np + 1], qa[mt][kk], b2, b3);
                }
            }
        }
        tr.op(EV_MMA, N_S);

        // ---- mask: rows past `valid` (ragged last block), causal for Sq > 1
        if (valid < BKV || (causal && Sq > 1)) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int n = 0; n < NS; ++n)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int row = m * BQ + mt * 16 + (lane >> 2) + (e >> 1) * 8;
                        const int col = warp * KPW + n * 8 + (lane & 3) * 2 + (e & 1);
                        const int t = row / G;
                        if (col >= valid || (causal && key0 + col > t + len - Sq)) sc[mt][n][e] = -IOSIM_INF;
                    }
        }

        // ---- online softmax (rows over quads of lanes)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                float mx = mx_[mt][hf];
#pragma unroll
                for (int n = 0; n < NS; ++n) mx = fmaxf(mx, fmaxf(sc[mt][n][2 * hf], sc[mt][n][2 * hf + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
                const float m_use = (mx == -IOSIM_INF) ? 0.f : mx * scale_log2;
                const float alpha = fast_exp2(mx_[mt][hf] * scale_log2 - m_use);
                mx_[mt][hf] = mx;
                float sum = 0.f;
#pragma unroll
                for (int n = 0; n < NS; ++n) {
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

        // ---- O += P V_w: P from registers, this warp's V rows by transposing ldmatrix
#pragma unroll
        for (int kk = 0; kk < KPW / 16; ++kk) {
            u32 pa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                pa[mt][0] = pack2(sc[mt][2 * kk][0], sc[mt][2 * kk][1]);
                pa[mt][1] = pack2(sc[mt][2 * kk][2], sc[mt][2 * kk][3]);
                pa[mt][2] = pack2(sc[mt][2 * kk + 1][0], sc[mt][2 * kk + 1][1]);
                pa[mt][3] = pack2(sc[mt][2 * kk + 1][2], sc[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < NO / 2; ++dp) {
                u32 b0, b1, b2, b3;
                ldsm_x4_t(b0, b1, b2, b3,
                          s_v + swz(warp * KPW + kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3),
                                    dp * 2 + (lane >> 4), CD));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma16816(o[mt][2 * dp], pa[mt], b0, b1);
                    mma16816(o[mt][2 * dp + 1], pa[mt], b2, b3);
                }
            }
        }
        tr.op(EV_MMA, N_PV);
    }
    cp_async_wait<0>();
    __syncthreads();                              // ring free: reuse it for the warp merge

    // ---- merge the warps: each writes (m, l, O) of its keys for every row, fp32
    float* mb = (float*)smem;                     // [WARPS][BQ] m (log2 units of the scaled score)
    float* lb = mb + WARPS * BQ;                  // [WARPS][BQ] l
    float* ob = lb + WARPS * BQ;                  // [WARPS][BQ][D] O (unnormalised)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            float ls = l[mt][hf];
            ls += __shfl_xor_sync(0xffffffff, ls, 1);
            ls += __shfl_xor_sync(0xffffffff, ls, 2);
            const int row = mt * 16 + (lane >> 2) + hf * 8;
            if ((lane & 3) == 0) {
                mb[warp * BQ + row] = mx_[mt][hf] == -IOSIM_INF ? -IOSIM_INF : mx_[mt][hf] * scale_log2;
                lb[warp * BQ + row] = ls;
            }
#pragma unroll
            for (int n = 0; n < NO; ++n)
                *(f2*)(ob + ((long long)warp * BQ + row) * D + n * 8 + (lane & 3) * 2) =
                    f2{o[mt][n][2 * hf], o[mt][n][2 * hf + 1]};
        }
    __syncthreads();

    const bool direct = splits == 1;
    const long long tile_id = (((long long)b * Hkv + hk) * n_m + m) * splits + k;   // partials
    for (int c = tid; c < rows_m * (D / 4); c += NT) {
        const int row = c / (D / 4), col = (c % (D / 4)) * 4;
        float mm = -IOSIM_INF;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) mm = fmaxf(mm, mb[w * BQ + row]);
        const float mu = mm == -IOSIM_INF ? 0.f : mm;
        float L = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int w = 0; w < WARPS; ++w) {
            const float e = fast_exp2(mb[w * BQ + row] - mu);
            L += e * lb[w * BQ + row];
            const f4 v = *(const f4*)(ob + ((long long)w * BQ + row) * D + col);
            acc[0] += e * v.x; acc[1] += e * v.y; acc[2] += e * v.z; acc[3] += e * v.w;
        }
        const float inv = L > 0.f ? 1.f / L : 0.f;
        if (direct) {
            const int rr = m * BQ + row;
            const long long grow = ((long long)b * Hq + hk * G + rr % G) * Sq + rr / G;  // [B][Hq][Sq]
            u2 v;
            v.x = pack2(acc[0] * inv, acc[1] * inv);
            v.y = pack2(acc[2] * inv, acc[3] * inv);
            *(u2*)(O + grow * D + col) = v;
            if (col == 0) LSE[grow] = L > 0.f ? (mu + __log2f(L)) * 0.69314718055994531f : IOSIM_INF;
        } else {
            const long long prow = tile_id * BQ + row;
            *(f4*)(Opart + prow * D + col) = f4{acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv};
            if (col == 0)   // m in natural-log units of the scaled score; -inf, 0 for no key
                *(f2*)(MLpart + prow * 2) = f2{mm == -IOSIM_INF ? -IOSIM_INF : mm * 0.69314718055994531f, L};
        }
    }
    if (direct) {
        tr.tile(EV_STORE, T_O, b, hk, m, rows_m * D * 2);
        tr.tile(EV_STORE, T_LSE, b, hk, m, rows_m * 4);
    } else {
        tr.ev(EV_STORE, T_OPART, 4, b, hk, m, k, rows_m * D * 4);
        tr.ev(EV_STORE, T_MLPART, 4, b, hk, m, k, rows_m * 2 * 4);
    }
    tr.finish();
}

// ---- combine ----------------------------------------------------------------------------
#define FD_MAX_SPLITS 128
extern "C" __global__ void __launch_bounds__(128)
fd_combine(const float* __restrict__ Opart, const float* __restrict__ MLpart, u16* __restrict__ O,
           float* __restrict__ LSE, int B, int Hq, int Hkv, int Sq, int splits, int n_m,
           u64* trace, int trace_cap) {
    using namespace fdk;
    __shared__ float ml[FD_MAX_SPLITS * BQ * 2];
    TraceRec tr;
    tr.init(trace, trace_cap);
    const int m = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
    const int G = Hq / Hkv, R = G * Sq;
    const int rows_m = min(BQ, R - m * BQ);
    const long long tile0 = (((long long)b * Hkv + hk) * n_m + m) * splits;   // split 0's tile
    // (m_k, l_k) of every split and row → shared memory (row-major per split: [k][BQ][2])
    for (int c = threadIdx.x; c < splits * BQ; c += 128) {
        const int kk = c / BQ, row = c % BQ;
        f2 v = f2{-IOSIM_INF, 0.f};
        if (row < rows_m) v = ldg_f2(MLpart + ((tile0 + kk) * BQ + row) * 2);
        ml[2 * c] = v.x;
        ml[2 * c + 1] = v.y;
    }
    __syncthreads();
    for (int c = threadIdx.x; c < rows_m * (D / 4); c += 128) {
        const int row = c / (D / 4), col = (c % (D / 4)) * 4;
        float mm = -IOSIM_INF;
        for (int kk = 0; kk < splits; ++kk) mm = fmaxf(mm, ml[2 * (kk * BQ + row)]);
        const float mu = mm == -IOSIM_INF ? 0.f : mm;
        float L = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
        for (int k0 = 0; k0 < splits; k0 += 8) {   // 8 splits' loads in flight at once
            f4 v[8];
#pragma unroll
            for (int u = 0; u < 8; ++u)
                if (k0 + u < splits) v[u] = ldg_f4(Opart + ((tile0 + k0 + u) * BQ + row) * D + col);
#pragma unroll
            for (int u = 0; u < 8; ++u)
                if (k0 + u < splits) {
                    const int kk = k0 + u;
                    const float w = __expf(ml[2 * (kk * BQ + row)] - mu) * ml[2 * (kk * BQ + row) + 1];
                    L += w;
                    acc[0] += w * v[u].x; acc[1] += w * v[u].y; acc[2] += w * v[u].z; acc[3] += w * v[u].w;
                }
        }
        const float inv = L > 0.f ? 1.f / L : 0.f;
        const int rr = m * BQ + row;
        const long long grow = ((long long)b * Hq + hk * G + rr % G) * Sq + rr / G;
        u2 v;
        v.x = pack2(acc[0] * inv, acc[1] * inv);
        v.y = pack2(acc[2] * inv, acc[3] * inv);
        *(u2*)(O + grow * D + col) = v;
        if (col == 0) LSE[grow] = L > 0.f ? mu + __logf(L) : IOSIM_INF;
    }
    // the schedule's per-split loads and exp, in its order (recorded after the work, as the
    // project's other elementwise kernels do)
    for (int kk = 0; kk < splits; ++kk) {
        tr.ev(EV_LOAD, T_MLPART, 4, b, hk, m, kk, rows_m * 2 * 4);
        tr.ev(EV_LOAD, T_OPART, 4, b, hk, m, kk, rows_m * D * 4);
        tr.op(EV_EXP, 0);
    }
    tr.tile(EV_STORE, T_O, b, hk, m, rows_m * D * 2);
    tr.tile(EV_STORE, T_LSE, b, hk, m, rows_m * 4);
    tr.finish();
}
