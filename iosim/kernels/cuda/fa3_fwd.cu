// FlashAttention-3 forward for Hopper (sm_90a): one CTA per (Q block i, head h, batch b), grid
// (n_q, Hq, B), q block fastest; with causal masking CTA x computes Q block n_q − 1 − x (the
// longest rows first) — the launch shape of iosim.algorithms.fa3.kernel.
//
// Warpgroups (128 threads each):
//   WG 0      producer: its warp 0 fills the shared-memory ring. Q_i once, then for every KV
//             block j: K_j and V_j into stage j mod STAGES, each tile completing on an mbarrier
//             of its own (k_full, v_full), each after the consumers have released that stage's
//             K (k_empty) and V (v_empty) slot: FA-3's separate K and V pipelines
//             (hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp: pipeline_k released after Q Kᵀ,
//             pipeline_v after P V). With FA3_SEPARATE_KV_RELEASE=0 one barrier per stage is
//             released after P V (the kernel before issue 12; its 2-stage ring starves).
//             Copies are TMA (cp.async.bulk.tensor through 3-d tensor maps, 128-byte swizzle)
//             or, with FA3_TMA=0, 16-byte cp.async by the warp's 32 lanes into the same layout,
//             completing with cp.async.mbarrier.arrive.noinc.
//             setmaxnreg gives its registers to the consumers.
//   WG 1..C   consumers, 64 rows of Q_i each (C = BQ/64): S = Q Kᵀ by wgmma with both operands in
//             shared memory (m64 n=BKV k16), online softmax in registers, O += P V by wgmma with
//             P from registers (the S accumulator packed to 16 bits) and V in shared memory.
//
// Overlaps (each a compile-time switch so that its cost is measured by removing it):
//   FA3_WARP_SPECIALIZED (1)  0: no producer warpgroup; warp 0 of consumer 0 issues the copy of
//                              block j+STAGES−1 inline once every consumer released its stage.
//   FA3_PINGPONG (1)          consumers take turns issuing their GEMMs (named barriers), so one's
//                              softmax runs while the other's GEMMs hold the tensor cores.
//   FA3_INTRA_OVERLAP (1)     within a consumer: S_{j+1} = Q K_{j+1}ᵀ and O += P_j V_j are issued
//                              together and the softmax of block j+1 runs while P_j V_j executes.
//
// Shared memory (dynamic, exactly the schedule's Q tile + STAGES × (K tile + V tile)); every
// tile is stored as D/64 column blocks of rows × 128 bytes with 16-byte chunk c of row r at
// chunk c ^ (r mod 8) (TMA's 128-byte swizzle; wgmma descriptors with layout type 1). The
// mbarriers are static shared memory.
//
// FP8 (-DIOSIM_FP8, d = 128, block_kv 128, TMA): Q, K and Vᵀ arrive as e4m3 bytes with one fp32
// scale per block (Q per CTA block, K and V per KV block: iosim/kernels/fp8.py quantizes them,
// after the Hadamard rotation of Q and K if asked). S = Q Kᵀ and O += P V run as wgmma k32 e4m3
// (both operands K-major, so V comes transposed: Vᵀ [d][N]); S is scaled by s_Q·s_K before the
// softmax; P is packed to e4m3 straight from the accumulator, which holds columns
// {2t, 2t+1, 8+2t, 8+2t+1} of each 16 where the k32 A operand wants four consecutive k, so Vᵀ's
// columns are stored in that order (fp8.py) and the product is unchanged; V's per-block scale is
// folded into the rescale factor α (O is kept in units of the current block's scale). O is fp16.
//
// Build flags: IOSIM_D (64|128), IOSIM_BQ (64·C), IOSIM_BKV (64|128), IOSIM_STAGES, IOSIM_WARPS
// (4·(1+C) with warp specialization, 4·C without), IOSIM_BF16, IOSIM_FP8, IOSIM_TRACE, and the
// switches above. Compile for sm_90a (wgmma, setmaxnreg).
#include "iosim_common.cuh"

#ifndef IOSIM_D
#define IOSIM_D 128
#endif
#ifndef IOSIM_BQ
#define IOSIM_BQ 128
#endif
#ifndef IOSIM_BKV
#define IOSIM_BKV 128
#endif
#ifndef IOSIM_STAGES
#define IOSIM_STAGES 2
#endif
#ifndef FA3_WARP_SPECIALIZED
#define FA3_WARP_SPECIALIZED 1
#endif
#ifndef FA3_PINGPONG
#define FA3_PINGPONG 1
#endif
#ifndef FA3_INTRA_OVERLAP
#define FA3_INTRA_OVERLAP 1
#endif
#ifndef FA3_TMA
#define FA3_TMA 1
#endif
#ifndef FA3_SEPARATE_KV_RELEASE
#define FA3_SEPARATE_KV_RELEASE 1
#endif
#ifndef IOSIM_FORCE_MASK
#define IOSIM_FORCE_MASK 0
#endif
#ifndef IOSIM_O_STORE
// experiments only (scripts/experiments/o_store_h200.py): 1 O written from the accumulator
// fragments (the kernel), 0 O computed but not written, 2 O staged through the consumer's own
// rows of the Q tile in shared memory and written coalesced, 16 bytes per thread
#define IOSIM_O_STORE 1
#endif
#ifndef IOSIM_WARPS
#define IOSIM_WARPS (4 * (IOSIM_BQ / 64 + FA3_WARP_SPECIALIZED))
#endif

namespace fa3 {
constexpr int D = IOSIM_D, BQ = IOSIM_BQ, BKV = IOSIM_BKV, STAGES = IOSIM_STAGES;
constexpr int C = BQ / 64;                       // consumer warpgroups
constexpr int WS = FA3_WARP_SPECIALIZED;
constexpr int NT = IOSIM_WARPS * 32;
#ifdef IOSIM_FP8
constexpr int EB = 1;                            // bytes per input element
#else
constexpr int EB = 2;
#endif
constexpr int ROW_BYTES = D * EB;                // one tile row
constexpr int NCB = ROW_BYTES / 128;             // 128-byte column blocks per row
constexpr int KSTEPS_QK = ROW_BYTES / 32;        // wgmma k-steps of S = Q Kᵀ (32 bytes each)
constexpr int KSTEPS_PV = BKV * EB / 32;         // ... and of O += P V
constexpr u32 Q_BYTES = BQ * D * EB;
constexpr u32 KV_BYTES = BKV * D * EB;
static_assert(4 * KSTEPS_PV == (BKV / 2) * EB / 4, "4 registers of P per k-step of O += P V");
constexpr int NS = BKV / 2;                      // S accumulator floats per consumer thread
constexpr int NO = D / 2;                        // O accumulator floats per consumer thread
constexpr int FULL_COUNT = FA3_TMA ? 1 : 32;     // arrivals that complete a "full" barrier
constexpr int PRODUCER_REGS = C <= 2 ? 24 : 32;  // setmaxnreg (FA-3's values)
constexpr int CONSUMER_REGS = ((65536 / 128 - PRODUCER_REGS) / C) / 8 * 8 > 240
                                  ? 240 : ((65536 / 128 - PRODUCER_REGS) / C) / 8 * 8;
static_assert(BQ % 64 == 0 && C >= 1 && C <= 3, "block_q = 64·C, 1 ≤ C ≤ 3");
static_assert(D == 64 || D == 128, "head dim 64 or 128");
static_assert(BKV == 64 || BKV == 128, "block_kv 64 or 128");
static_assert(NT == 128 * (C + WS), "warps = 4·(consumers + producer)");
static_assert(STAGES >= 1 && STAGES <= 4, "1..4 stages");
#ifdef IOSIM_FP8
static_assert(D == 128 && BKV == 128 && FA3_TMA, "fp8: d 128, block_kv 128, TMA copies");
#endif
// compute-phase names (iosim/kernels/trace.py: NAMES["fa3_fwd"])
enum { N_S = 0, N_EXP = 1, N_PV = 2 };
}  // namespace fa3

// ---- mbarriers, named barriers, copies --------------------------------------------------
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    u32 done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
__device__ __forceinline__ void cp_async_arrive_noinc(u32 bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void named_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(threads) : "memory");
}
// TMA: a box of a 3-d tensor map (cols, rows, batch·head) → shared memory, completing on `bar`
__device__ __forceinline__ void tma_load_3d(u32 dst, const void* tmap, int c0, int c1, int c2, u32 bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];"
                 :: "r"(dst), "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
}

// ---- wgmma --------------------------------------------------------------------------------
// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading- and stride-dimension
// byte offsets (all >> 4), layout type 1 in bits 62-63. Tiles are 1024-byte aligned (base offset 0).
__device__ __forceinline__ u64 sw128_desc(u32 addr, u32 lbo_bytes, u32 sbo_bytes) {
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)((lbo_bytes >> 4) & 0x3FFF) << 16)
           | ((u64)((sbo_bytes >> 4) & 0x3FFF) << 32) | ((u64)1 << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
// keeps the compiler from moving reads/writes of accumulator registers across wgmma issue/wait
template <int R>
__device__ __forceinline__ void reg_fence(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
template <int R>
__device__ __forceinline__ void reg_fence_u(u32 (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+r"(d[i]) :: "memory");
}

// wgmma m64nNk16, fp32 accumulators: SS (A and B from shared memory, both K-major) and RS (A from
// registers, B from shared memory MN-major, i.e. transposed). `acc` 0 overwrites D.
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[32], u64 da, u64 db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." IOSIM_MMA_T "." IOSIM_MMA_T " "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(acc));
}
__device__ __forceinline__ void wgmma_rs_n64(float (&d)[32], const u32 (&a)[4], u64 db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." IOSIM_MMA_T "." IOSIM_MMA_T " "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}

__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], u64 da, u64 db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." IOSIM_MMA_T "." IOSIM_MMA_T " "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(acc));
}
__device__ __forceinline__ void wgmma_rs_n128(float (&d)[64], const u32 (&a)[4], u64 db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." IOSIM_MMA_T "." IOSIM_MMA_T " "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}

#ifdef IOSIM_FP8
// e4m3 × e4m3 → fp32, m64n128k32; both operands K-major (fp8 wgmma has no transpose)
#define FA3_D64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
    "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, " \
    "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
    "%56, %57, %58, %59, %60, %61, %62, %63}"
#define FA3_O64(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
    "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), \
    "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), \
    "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), \
    "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), \
    "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), \
    "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), \
    "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), \
    "+f"(d[63])
__device__ __forceinline__ void wgmma_ss_e4m3(float (&d)[64], u64 da, u64 db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " FA3_D64 ", %64, %65, p, 1, 1;\n}\n"
                 : FA3_O64(d) : "l"(da), "l"(db), "r"(acc));
}
__device__ __forceinline__ void wgmma_rs_e4m3(float (&d)[64], const u32 (&a)[4], u64 db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " FA3_D64
                 ", {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
                 : FA3_O64(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}
// four floats → four e4m3 bytes, x0 in the lowest byte (saturating, round to nearest even)
__device__ __forceinline__ u32 pack4_e4m3(float x0, float x1, float x2, float x3) {
    unsigned short lo, hi;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(x1), "f"(x0));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(x3), "f"(x2));
    return (u32)lo | ((u32)hi << 16);
}
#endif
template <int R>
__device__ __forceinline__ void wgmma_ss(float (&d)[R], u64 da, u64 db, int acc) {
#ifdef IOSIM_FP8
    wgmma_ss_e4m3(d, da, db, acc);
#else
    if constexpr (R == 64) wgmma_ss_n128(d, da, db, acc); else wgmma_ss_n64(d, da, db, acc);
#endif
}
template <int R>
__device__ __forceinline__ void wgmma_rs(float (&d)[R], const u32 (&a)[4], u64 db, int acc) {
#ifdef IOSIM_FP8
    wgmma_rs_e4m3(d, a, db, acc);
#else
    if constexpr (R == 64) wgmma_rs_n128(d, a, db, acc); else wgmma_rs_n64(d, a, db, acc);
#endif
}

// ---- trace: events come from the producer (loads) and consumer 0 (GEMMs, softmax, stores), so
// a slot's event index is taken with an atomic on its counter (word 0); same layout as TraceRec.
struct Fa3Trace {
#ifdef IOSIM_TRACE
    u64* slot;
    u32 cap;
    u32 smid;
#endif
    __device__ __forceinline__ void init(u64* buf, int cap_) {
#ifdef IOSIM_TRACE
        u64 cta = blockIdx.x + (u64)gridDim.x * (blockIdx.y + (u64)gridDim.y * blockIdx.z);
        cap = (u32)cap_;
        slot = buf + cta * (1 + 4 * (u64)cap_);
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
#endif
    }
    __device__ __forceinline__ void ev(int kind, int id, int ncoord, int c0, int c1, int c2, u32 bytes) {
#ifdef IOSIM_TRACE
        u32 n = (u32)atomicAdd((unsigned long long*)slot, 1ULL);
        if (n < cap) {
            u64 t, clk;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
            clk = clock64();
            u64* e = slot + 1 + 4 * (u64)n;
            e[0] = (u64)bytes | ((u64)id << 32) | ((u64)kind << 48) | ((u64)ncoord << 52) | ((u64)smid << 56);
            e[1] = (u64)(c0 & 0xffff) | ((u64)(c1 & 0xffff) << 16) | ((u64)(c2 & 0xffff) << 32);
            e[2] = t;
            e[3] = clk;
        }
#endif
    }
    __device__ __forceinline__ void tile(int kind, int tensor, int c0, int c1, int c2, u32 bytes) {
        ev(kind, tensor, 3, c0, c1, c2, bytes);
    }
    __device__ __forceinline__ void op(int kind, int name) { ev(kind, name, 0, 0, 0, 0, 0); }
};

extern "C" __global__ void __launch_bounds__(fa3::NT, 1)
fa3_fwd(const u16* __restrict__ Q, const u16* __restrict__ K, const u16* __restrict__ V,
        u16* __restrict__ O, float* __restrict__ LSE, const unsigned char* __restrict__ tmaps,
        const float* __restrict__ scale_q, const float* __restrict__ scale_k,
        const float* __restrict__ scale_v,      // fp8 only: per-block dequantization scales
        int B, int Hq, int Hkv, int Nq, int Nkv, int causal, float scale, u64* trace, int trace_cap) {
    using namespace fa3;
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) u64 bars[1 + 4 * STAGES];
    Fa3Trace tr;
    tr.init(trace, trace_cap);

    const int n_q = gridDim.x;
    const int i = causal ? n_q - 1 - (int)blockIdx.x : (int)blockIdx.x;   // longest rows first
    const int h = blockIdx.y, b = blockIdx.z;
    const int hk = h / (Hq / Hkv);
    const int r0 = i * BQ;
    const int rows_q = min(BQ, Nq - r0);
    const int off = Nkv - Nq;                      // bottom-right causal alignment
    const int n_kv = (Nkv + BKV - 1) / BKV;
    int j_stop = n_kv;
    if (causal) {
        const int last_col = r0 + rows_q - 1 + off;
        j_stop = last_col < 0 ? 0 : min(n_kv, last_col / BKV + 1);
    }
    const float scale_log2 = scale * IOSIM_LOG2E;

    const u32 s_q = smem_u32(smem);
    const u32 s_kv = s_q + Q_BYTES;                // stage s: K at s_kv + 2s·KV_BYTES, V after it
    const u32 bar_q = smem_u32(&bars[0]);
    auto k_full = [&](int st) { return smem_u32(&bars[1 + st]); };
    auto v_full = [&](int st) { return smem_u32(&bars[1 + STAGES + st]); };
    auto k_empty = [&](int st) { return smem_u32(&bars[1 + 2 * STAGES + st]); };
    // one barrier per stage for K and V together when they are released together
    auto v_empty = [&](int st) { return smem_u32(&bars[1 + (FA3_SEPARATE_KV_RELEASE ? 3 : 2) * STAGES + st]); };

    const int tid = threadIdx.x, wg = tid / 128;
    if (tid == 0) { STAMP(trace, 0); STAMP_SMID(trace); }
    if (tid == 0) {
        if (s_q & 1023) __trap();                  // the 128-byte swizzle needs 1024-byte tiles
        mbar_init(bar_q, FULL_COUNT);
        for (int st = 0; st < STAGES; ++st) {
            mbar_init(k_full(st), FULL_COUNT);
            mbar_init(v_full(st), FULL_COUNT);
            mbar_init(k_empty(st), 4 * C);         // every consumer warp releases a slot
            mbar_init(v_empty(st), 4 * C);         // (the same barrier when not separate)
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    // ---- copies, issued by one warp (lane 0 with TMA, all 32 lanes with cp.async) -----------
    const int lane = tid % 32;
    auto load_tile = [&](u32 dst, const u16* src, int tmap, int rows, int valid, int c1, int c2, u32 bar) {
#if FA3_TMA
        if (lane == 0) {
            mbar_expect_tx(bar, rows * ROW_BYTES);
#ifdef IOSIM_FP8
            if (tmap == 2)                         // Vᵀ: D rows of BKV bytes, from column j·BKV
                tma_load_3d(dst, tmaps + 128 * tmap, c1, 0, c2, bar);
            else
#endif
#pragma unroll
            for (int cb = 0; cb < NCB; ++cb)
                tma_load_3d(dst + cb * rows * 128, tmaps + 128 * tmap, cb * 128 / EB, c1, c2, bar);
        }
#else
        for (int c = lane; c < rows * (D / 8); c += 32) {
            const int r = c / (D / 8), ch = c % (D / 8);
            const bool ok = r < valid;
            cp_async16(dst + (ch >> 3) * rows * 128 + r * 128 + (((ch & 7) ^ (r & 7)) << 4),
                       ok ? (const void*)(src + (long long)r * D + ch * 8) : (const void*)src, ok ? 16u : 0u);
        }
        cp_async_arrive_noinc(bar);
#endif
    };
    auto load_q = [&]() {
        load_tile(s_q, Q + (((long long)b * Hq + h) * Nq + r0) * D, 0, BQ, rows_q, r0, b * Hq + h, bar_q);
        if (lane == 0) tr.tile(EV_LOAD, T_Q, b, h, i, rows_q * D * 2);
    };
    // block j's K (V) slot is free once every consumer released block j − STAGES's K (V)
    auto wait_free = [&](u32 bar, int j) {
        if (j >= STAGES) mbar_wait(bar, ((j / STAGES) - 1) & 1);
    };
    auto load_kv = [&](int j) {                    // K_j, then V_j, each into its free slot
        const int st = j % STAGES;
        const int valid = min(BKV, Nkv - j * BKV);
        const long long base = ((long long)b * Hkv + hk) * Nkv * D + (long long)j * BKV * D;
        const u32 s_k = s_kv + 2 * st * KV_BYTES;
        wait_free(k_empty(st), j);
        load_tile(s_k, K + base, 1, BKV, valid, j * BKV, b * Hkv + hk, k_full(st));
        if (lane == 0) tr.tile(EV_LOAD, T_K, b, hk, j, valid * D * 2);
        if (FA3_SEPARATE_KV_RELEASE) wait_free(v_empty(st), j);
        load_tile(s_k + KV_BYTES, V + base, 2, BKV, valid, j * BKV, b * Hkv + hk, v_full(st));
        if (lane == 0) tr.tile(EV_LOAD, T_V, b, hk, j, valid * D * 2);
    };

    if (WS && wg == 0) {
        // ================================ producer ================================
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(PRODUCER_REGS));
        if (tid < 32) {
            if (tid == 0) STAMP(trace, 1);
            load_q();
            for (int j = 0; j < j_stop; ++j) load_kv(j);
#if !FA3_TMA
            cp_async_wait<0>();
#endif
        }
        return;
    }
    // ================================ consumers ================================
#if FA3_WARP_SPECIALIZED
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(CONSUMER_REGS));
#endif
    const int c = wg - WS;                         // consumer index: rows 64c .. 64c+63 of Q_i
    const int t = tid - 128 * wg;
    const int w = t / 32;
    const bool loader = !WS && c == 0 && w == 0;   // no producer: this warp issues the copies
    const bool rec = c == 0 && t == 0;             // records the CTA's compute events
    constexpr bool PP = FA3_PINGPONG && C > 1;
    auto pp_sync = [&]() { if (PP) named_sync(1 + c, 256); };
    auto pp_arrive = [&]() { if (PP) named_arrive(1 + (c + 1) % C, 256); };
    // this warp is done with block j's K (read by S = Q Kᵀ); with separate release K's slot
    // goes back to the producer now, else with V's after O += P V
    auto release_k = [&](int j) {
        if (FA3_SEPARATE_KV_RELEASE) {
            __syncwarp();
            if (lane == 0) mbar_arrive(k_empty(j % STAGES));
        }
    };
    auto release = [&](int j) {                    // ... and with block j's V (O += P V)
        __syncwarp();
        if (lane == 0) mbar_arrive(v_empty(j % STAGES));
        if (loader && j + STAGES < j_stop)         // refill the stage just released
            load_kv(j + STAGES);
    };
    if (loader) {
        load_q();
        for (int j = 0; j < min(STAGES, j_stop); ++j) load_kv(j);
    }

    float o[NO], s[NS], m[2], l[2], alpha[2];
    u32 p[NS * EB / 4];                            // P as the A operand: 16-bit pairs or e4m3 quads
#ifdef IOSIM_FP8
    const int n_qb = gridDim.x;
    const float sq = scale_q[((long long)b * Hq + h) * n_qb + i];
    const float* sk_row = scale_k + ((long long)b * Hkv + hk) * n_kv;
    const float* sv_row = scale_v + ((long long)b * Hkv + hk) * n_kv;
    float sv_cur = j_stop > 0 ? sv_row[0] : 1.f;   // O is kept in units of this block's V scale
#else
    float sv_cur = 1.f;
#endif
#pragma unroll
    for (int x = 0; x < NO; ++x) o[x] = 0.f;
    m[0] = m[1] = -IOSIM_INF;
    l[0] = l[1] = 0.f;

    auto qdesc = [&](int kk) {
        return sw128_desc(s_q + (kk >> 2) * BQ * 128 + c * 64 * 128 + (kk & 3) * 32, 16, 1024);
    };
    auto issue_s = [&](int j) {                    // S = Q_i K_jᵀ, both from shared memory
        const u32 s_k = s_kv + 2 * (j % STAGES) * KV_BYTES;
#pragma unroll
        for (int kk = 0; kk < KSTEPS_QK; ++kk)
            wgmma_ss<NS>(s, qdesc(kk), sw128_desc(s_k + (kk >> 2) * BKV * 128 + (kk & 3) * 32, 16, 1024),
                         kk > 0);
        wgmma_commit();
    };
    auto issue_pv = [&](int j) {                   // O += P V_j, P from registers, V transposed
        const u32 s_v = s_kv + (2 * (j % STAGES) + 1) * KV_BYTES;
#pragma unroll
        for (int kk = 0; kk < KSTEPS_PV; ++kk) {
            const u32 a[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
#ifdef IOSIM_FP8
            wgmma_rs<NO>(o, a, sw128_desc(s_v + kk * 32, 16, 1024), 1);   // Vᵀ, K-major
#else
            wgmma_rs<NO>(o, a, sw128_desc(s_v + kk * 2048, BKV * 128, 1024), 1);
#endif
        }
        wgmma_commit();
    };
    auto softmax = [&](int j) {                    // mask, online softmax; S ← exp(S − m)
        const int c0 = j * BKV;
#ifdef IOSIM_FP8
        const float dq = sq * sk_row[j];           // S = s_Q s_K (Q₈ K₈ᵀ)
#pragma unroll
        for (int x = 0; x < NS; ++x) s[x] *= dq;
#endif
        // IOSIM_FORCE_MASK (experiments only: scripts/experiments/mask_cost_h200.py): every step
        // runs the mask's compares and selects (a non-causal problem masks nothing)
        const bool need_mask = IOSIM_FORCE_MASK || (c0 + BKV > Nkv) || (causal && c0 + BKV - 1 > r0 + off);
        if (need_mask) {
#pragma unroll
            for (int x = 0; x < NS; ++x) {
                const int row = r0 + 64 * c + 16 * w + (lane >> 2) + ((x >> 1) & 1) * 8;
                const int col = c0 + 8 * (x >> 2) + 2 * (lane & 3) + (x & 1);
                if (col >= Nkv || (causal && col > row + off)) s[x] = -IOSIM_INF;
            }
        }
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            float mx = m[hf];
#pragma unroll
            for (int x = 0; x < NS / 4; ++x) mx = fmaxf(mx, fmaxf(s[4 * x + 2 * hf], s[4 * x + 2 * hf + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
            const float m_use = (mx == -IOSIM_INF) ? 0.f : mx * scale_log2;
            alpha[hf] = fast_exp2(m[hf] * scale_log2 - m_use);
            m[hf] = mx;
            float sum = 0.f;
#pragma unroll
            for (int x = 0; x < NS / 4; ++x) {
                const float p0 = fast_exp2(s[4 * x + 2 * hf] * scale_log2 - m_use);
                const float p1 = fast_exp2(s[4 * x + 2 * hf + 1] * scale_log2 - m_use);
                s[4 * x + 2 * hf] = p0;
                s[4 * x + 2 * hf + 1] = p1;
                sum += p0 + p1;
            }
            l[hf] = l[hf] * alpha[hf] + sum;
        }
    };
    auto rescale_and_pack = [&](int j) {           // O ← α·O; P = S as the A operand of P·V
#ifdef IOSIM_FP8
        const float sv_j = sv_row[j];              // O moves to units of V_j's scale
        const float a0 = alpha[0] * (sv_cur / sv_j), a1 = alpha[1] * (sv_cur / sv_j);
        sv_cur = sv_j;
#pragma unroll
        for (int x = 0; x < NO; ++x) o[x] *= ((x >> 1) & 1) ? a1 : a0;
#pragma unroll
        for (int kk = 0; kk < NS / 16; ++kk) {
            const float* q = s + 16 * kk;
            p[4 * kk] = pack4_e4m3(q[0], q[1], q[4], q[5]);
            p[4 * kk + 1] = pack4_e4m3(q[2], q[3], q[6], q[7]);
            p[4 * kk + 2] = pack4_e4m3(q[8], q[9], q[12], q[13]);
            p[4 * kk + 3] = pack4_e4m3(q[10], q[11], q[14], q[15]);
        }
#else
        (void)j;
#pragma unroll
        for (int x = 0; x < NO; ++x) o[x] *= alpha[(x >> 1) & 1];
#pragma unroll
        for (int x = 0; x < NS / 2; ++x) p[x] = pack2(s[2 * x], s[2 * x + 1]);
#endif
    };

    // Experiments only (scripts/experiments/fa3_phase_stamps_h200.py): -DIOSIM_PHASE_STAMPS=n
    // (with IOSIM_STAMPS) makes PSTAMP(j, e) write thread 0 of consumer c's clock64 at event e
    // (0..7) of KV step j < 8 into the trace buffer after the CTAs' 16 stamp slots, for the
    // first n CTAs (linear index): [cta][c][j][e], 3 · 8 · 8 slots per CTA; -DIOSIM_PHASE_MASK=m
    // stamps only the events e whose bit is set in m (default all: 0xff), so that a build with
    // two stamps per step times one phase with less perturbation
    // (scripts/experiments/fa3_phase_pairs_h200.py).
#if defined(IOSIM_PHASE_STAMPS) && defined(IOSIM_STAMPS) && !defined(IOSIM_TRACE)
    const unsigned long long cta_lin = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    u64* const pst = trace + 16ull * gridDim.x * gridDim.y * gridDim.z + cta_lin * 192 + c * 64;
    const bool pst_on = t == 0 && cta_lin < IOSIM_PHASE_STAMPS;
#ifndef IOSIM_PHASE_MASK
#define IOSIM_PHASE_MASK 0xff                      // which events e are stamped (bit e)
#endif
#ifdef IOSIM_PHASE_NOCLOBBER                       // the clock read without the memory clobber
#define PSTAMP_CLOCK(c_) asm volatile("mov.u64 %0, %%clock64;" : "=l"(c_))
#else
#define PSTAMP_CLOCK(c_) asm volatile("mov.u64 %0, %%clock64;" : "=l"(c_) :: "memory")
#endif
#define PSTAMP(j, e) do { if (((IOSIM_PHASE_MASK) >> (e) & 1) && pst_on && (j) < 8) { unsigned long long c_; \
        PSTAMP_CLOCK(c_); pst[(j) * 8 + (e)] = c_; } } while (0)
#else
#define PSTAMP(j, e) do {} while (0)
#endif
    if (PP && c == C - 1) named_arrive(1, 256);    // consumer 0 issues first
    mbar_wait(bar_q, 0);
    if (rec) STAMP(trace, 2);
#if FA3_INTRA_OVERLAP
    if (j_stop > 0) {
        PSTAMP(0, 0);
        mbar_wait(k_full(0), 0);
        pp_sync();
        PSTAMP(0, 1);
        wgmma_fence();
        issue_s(0);
        pp_arrive();
        PSTAMP(0, 2);
        if (rec) tr.op(EV_MMA, N_S);
        wgmma_wait<0>();
        reg_fence(s);
        PSTAMP(0, 3);
        if (rec) STAMP(trace, 3);
        if (c == C - 1 && t == 0) STAMP(trace, 10);
        release_k(0);
        softmax(0);
        PSTAMP(0, 4);
        if (rec) tr.op(EV_EXP, N_EXP);
        rescale_and_pack(0);
        PSTAMP(0, 6);
        for (int j = 1; j < j_stop; ++j) {
            PSTAMP(j, 0);
            mbar_wait(k_full(j % STAGES), (j / STAGES) & 1);
            mbar_wait(v_full((j - 1) % STAGES), ((j - 1) / STAGES) & 1);
            pp_sync();
            PSTAMP(j, 1);
            wgmma_fence();
            issue_s(j);                            // S_j = Q K_jᵀ ...
            issue_pv(j - 1);                       // ... and O += P_{j-1} V_{j-1}, both in flight
            pp_arrive();
            PSTAMP(j, 2);
            if (rec) { tr.op(EV_MMA, N_S); tr.op(EV_MMA, N_PV); }
            wgmma_wait<1>();                       // S_j done; P_{j-1} V_{j-1} still running
            reg_fence(s);
            PSTAMP(j, 3);
            release_k(j);
            if (rec && j <= 3) STAMP(trace, 10 + j);   // S_j done (experiments)
            if (c == C - 1 && t == 0 && j == 3) STAMP(trace, 14);
            softmax(j);
            PSTAMP(j, 4);
            if (rec) tr.op(EV_EXP, N_EXP);
            wgmma_wait<0>();
            reg_fence(o);
            reg_fence_u(p);
            PSTAMP(j, 5);
            release(j - 1);
            rescale_and_pack(j);
            PSTAMP(j, 6);
        }
        const int jl = j_stop - 1;
        PSTAMP(j_stop, 0);
        mbar_wait(v_full(jl % STAGES), (jl / STAGES) & 1);
        pp_sync();
        PSTAMP(j_stop, 1);
        wgmma_fence();
        issue_pv(jl);
        pp_arrive();
        PSTAMP(j_stop, 2);
        if (rec) tr.op(EV_MMA, N_PV);
        wgmma_wait<0>();
        reg_fence(o);
        PSTAMP(j_stop, 5);
        release(jl);
    }
#else
    for (int j = 0; j < j_stop; ++j) {
        PSTAMP(j, 0);
        mbar_wait(k_full(j % STAGES), (j / STAGES) & 1);
        pp_sync();
        PSTAMP(j, 1);
        wgmma_fence();
        issue_s(j);
        pp_arrive();
        PSTAMP(j, 2);
        if (rec) tr.op(EV_MMA, N_S);
        wgmma_wait<0>();
        reg_fence(s);
        PSTAMP(j, 3);
        release_k(j);
        if (rec && j >= 1 && j <= 3) STAMP(trace, 10 + j);   // S_j done (experiments)
        if (c == C - 1 && t == 0 && j == 3) STAMP(trace, 14);
        softmax(j);
        PSTAMP(j, 4);
        if (rec) tr.op(EV_EXP, N_EXP);
        rescale_and_pack(j);
        PSTAMP(j, 5);
        mbar_wait(v_full(j % STAGES), (j / STAGES) & 1);
        pp_sync();
        PSTAMP(j, 6);
        wgmma_fence();
        issue_pv(j);
        pp_arrive();
        if (rec) tr.op(EV_MMA, N_PV);
        wgmma_wait<0>();
        reg_fence(o);
        PSTAMP(j, 7);
        release(j);
    }
#endif
    if (rec) STAMP(trace, 4);
    if (c == C - 1 && t == 0) STAMP(trace, 8);
    if (PP && c == 0) named_sync(1, 256);          // consumes consumer C−1's last arrive
    if (rec) STAMP(trace, 9);

    // ---- epilogue: O_i = O / l written once, LSE_i = m·scale + ln l (+inf for rows that see
    // no key at all; their O is 0)
    u16* o_g = O + (((long long)b * Hq + h) * Nq + r0) * D;
    float* lse_g = LSE + ((long long)b * Hq + h) * Nq + r0;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        float lsum = l[hf];
        lsum += __shfl_xor_sync(0xffffffff, lsum, 1);
        lsum += __shfl_xor_sync(0xffffffff, lsum, 2);
        const float inv = lsum > 0.f ? sv_cur / lsum : 0.f;
        const int row = 64 * c + 16 * w + (lane >> 2) + hf * 8;
        if (row < rows_q) {
#pragma unroll
            for (int x = 0; x < D / 8; ++x) {
                const u32 v = pack2(o[4 * x + 2 * hf] * inv, o[4 * x + 2 * hf + 1] * inv);
#if IOSIM_O_STORE == 1
                *(u32*)(o_g + (long long)row * D + 8 * x + 2 * (lane & 3)) = v;
#elif IOSIM_O_STORE == 2
                const int col = 8 * x + 2 * (lane & 3);  // the Q tile's layout: 64-column blocks
                *(u32*)(smem + (col / 64) * BQ * 128 + row * 128 + (col % 64) * 2) = v;
#else
                if (v == 0x7fff7fffu) *(u32*)(o_g + (long long)row * D + 8 * x + 2 * (lane & 3)) = v;
#endif
            }
            if ((lane & 3) == 0) lse_g[row] = lsum > 0.f ? m[hf] * scale + __logf(lsum) : IOSIM_INF;
        }
    }
#if IOSIM_O_STORE == 2
    named_sync(8 + c, 128);                        // this consumer's rows are in shared memory
    for (int q = t; q < 64 * (D / 8); q += 128) {
        const int row = 64 * c + q / (D / 8), col = 8 * (q % (D / 8));
        if (row < rows_q)
            *(uint4*)(o_g + (long long)row * D + col) =
                *(const uint4*)(smem + (col / 64) * BQ * 128 + row * 128 + (col % 64) * 2);
    }
#endif
    if (rec) {
        tr.tile(EV_STORE, T_O, b, h, i, rows_q * D * 2);
        tr.tile(EV_STORE, T_LSE, b, h, i, rows_q * 4);
    }
    if (rec) STAMP(trace, 5);
    if (c == C - 1 && t == 0) STAMP(trace, 6);
#if !FA3_TMA
    if (loader) cp_async_wait<0>();
#endif
}
