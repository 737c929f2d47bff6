// Shared device helpers for iosim's attention kernels: element conversion, tensor-core MMA,
// ldmatrix, cp.async, the swizzled shared-memory layout, and the trace recorder.
//
// No CUDA headers are included (NVRTC in CuPy compiles this without include paths): halves
// and bfloat16s travel as raw 16-bit words and are converted with PTX.
//
// Build flags:  -DIOSIM_BF16   bf16 inputs (default fp16)
//               -DIOSIM_TRACE  record every tile load/store and MMA/exp phase per CTA
#pragma once

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

struct __align__(16) f4 { float x, y, z, w; };
struct __align__(8) f2 { float x, y; };

#ifdef IOSIM_BF16
#define IOSIM_MMA_T "bf16"
#else
#define IOSIM_MMA_T "f16"
#endif

#define IOSIM_INF __int_as_float(0x7f800000)
#define IOSIM_LOG2E 1.4426950408889634f

// ---- conversions ---------------------------------------------------------------------
__device__ __forceinline__ u32 pack2(float lo, float hi) {
    u32 r;
#ifdef IOSIM_BF16
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}

__device__ __forceinline__ float to_f32(u16 x) {
#ifdef IOSIM_BF16
    return __uint_as_float(((u32)x) << 16);
#else
    float f;
    asm("{ .reg .f16 h; mov.b16 h, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "h"(x));
    return f;
#endif
}

__device__ __forceinline__ u16 from_f32(float f) {
    u16 r;
#ifdef IOSIM_BF16
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
#else
    asm("{ .reg .f16 h; cvt.rn.f16.f32 h, %1; mov.b16 %0, h; }" : "=h"(r) : "f"(f));
#endif
    return r;
}

__device__ __forceinline__ float lo_f32(u32 x) { return to_f32((u16)(x & 0xffff)); }
__device__ __forceinline__ float hi_f32(u32 x) { return to_f32((u16)(x >> 16)); }

__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// ---- shared memory ---------------------------------------------------------------------
__device__ __forceinline__ u32 smem_u32(const void* p) {
    u32 r;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
    return r;
}

// A tile of rows × (8·chunks) 16-bit elements, stored row-major in 16-byte chunks whose
// column index is XORed with (row mod 8): the 8 rows one ldmatrix reads land in 8 different
// bank groups, with no padding (so the tile takes exactly rows·cols·2 bytes).
__device__ __forceinline__ u32 swz(int row, int chunk, int chunks_per_row) {
    return (u32)((row * chunks_per_row + (chunk ^ (row & 7))) * 16);
}

__device__ __forceinline__ void ldsm_x4(u32& r0, u32& r1, u32& r2, u32& r3, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_t(u32& r0, u32& r1, u32& r2, u32& r3, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

__device__ __forceinline__ void sts32(u32 addr, u32 v) {
    asm volatile("st.shared.b32 [%0], %1;" :: "r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ u32 lds32(u32 addr) {
    u32 v;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
    return v;
}

// ---- cp.async: global → shared without registers; src_bytes < 16 zero-fills the rest ------
__device__ __forceinline__ void cp_async16(u32 dst, const void* src, u32 src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// 4-byte copy (row statistics: a [B][H][N] fp32 tensor's rows are only 4-byte aligned)
__device__ __forceinline__ void cp_async4(u32 dst, const void* src, u32 src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// A rows × D tile of a row-major [N][D] 16-bit matrix → swizzled shared memory by 16-byte
// cp.async, spread over NT threads; rows past `valid` are zero-filled (no global read).
template <int D, int NT>
__device__ __forceinline__ void load_tile(u32 dst, const u16* src, int rows, int valid, int tid) {
    constexpr int CD = D / 8;
    for (int c = tid; c < rows * CD; c += NT) {
        int r = c / CD, ch = c % CD;
        bool ok = r < valid;
        cp_async16(dst + swz(r, ch, CD), ok ? (const void*)(src + (long long)r * D + ch * 8) : (const void*)src,
                   ok ? 16u : 0u);
    }
}
// ROWS fp32 row statistics → shared memory, one 4-byte cp.async per row (rows of a [B][H][N]
// fp32 tensor start 4-byte aligned only); rows past `valid` are zero-filled
template <int ROWS, int NT>
__device__ __forceinline__ void load_rowstat(u32 dst, const float* src, int valid, int tid) {
    for (int r = tid; r < ROWS; r += NT) {
        const bool ok = r < valid;
        cp_async4(dst + 4 * r, ok ? (const void*)(src + r) : (const void*)src, ok ? 4u : 0u);
    }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

// ---- tensor cores: C[16×8] += A[16×16]·B[16×8], fp32 accumulate ------------------------
__device__ __forceinline__ void mma16816(float* c, const u32* a, u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32." IOSIM_MMA_T "." IOSIM_MMA_T ".f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- trace ------------------------------------------------------------------------------
// Per CTA a fixed slot of 1 + 4·cap u64 words: word 0 = number of events recorded (may exceed
// cap: then the slot overflowed and the decoder says so), then 4 words per event:
//   w0 = bytes | id << 32 | kind << 48 | ncoord << 52 | smid << 56
//   w1 = c0 | c1 << 16 | c2 << 32 | c3 << 48
//   w2 = %globaltimer (ns), w3 = clock64()
// Thread 0 of the CTA writes, right after it issued its part of the operation.
#define EV_LOAD 1
#define EV_STORE 2
#define EV_STORE_REDUCE 3
#define EV_MMA 4
#define EV_EXP 5

// tensor ids (iosim/kernels/trace.py: TENSORS)
#define T_Q 0
#define T_K 1
#define T_V 2
#define T_O 3
#define T_LSE 4
#define T_DO 5
#define T_D 6
#define T_DQACC 7
#define T_DQ 8
#define T_DK 9
#define T_DV 10
#define T_DK_EXP 11
#define T_DV_EXP 12
#define T_S 13
#define T_P 14
#define T_M 15
#define T_L 16

// Experiments only (scripts/experiments/cta_phases_h200.py): -DIOSIM_STAMPS (without
// IOSIM_TRACE) makes STAMP(k) write %globaltimer into slot k of the CTA's 16 slots of the trace
// buffer: plain stores, no atomics, so a full grid runs as it does untraced. Slot 7 holds %smid.
#if defined(IOSIM_STAMPS) && !defined(IOSIM_TRACE)
#define STAMP(buf, k) do { unsigned long long t_; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_)); \
        (buf)[(((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) * 16 + (k)] = t_; \
    } while (0)
#define STAMP_SMID(buf) do { unsigned int s_; asm volatile("mov.u32 %0, %%smid;" : "=r"(s_)); \
        (buf)[(((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) * 16 + 7] = s_; \
    } while (0)
#else
#define STAMP(buf, k) do {} while (0)
#define STAMP_SMID(buf) do {} while (0)
#endif

struct TraceRec {
#ifdef IOSIM_TRACE
    u64* slot;
    u32 n;
    u32 cap;
    u32 smid;
#endif
    __device__ __forceinline__ void init(u64* buf, int cap_) {
#ifdef IOSIM_TRACE
        u64 cta = blockIdx.x + (u64)gridDim.x * (blockIdx.y + (u64)gridDim.y * blockIdx.z);
        cap = (u32)cap_;
        slot = buf + cta * (1 + 4 * (u64)cap_);
        n = 0;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
#endif
    }
    __device__ __forceinline__ void ev(int kind, int id, int ncoord, int c0, int c1, int c2, int c3,
                                       u32 bytes) {
#ifdef IOSIM_TRACE
        if (threadIdx.x == 0) {
            if (n < cap) {
                u64 t, clk;
                asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
                clk = clock64();
                u64* e = slot + 1 + 4 * (u64)n;
                e[0] = (u64)bytes | ((u64)id << 32) | ((u64)kind << 48) | ((u64)ncoord << 52)
                       | ((u64)smid << 56);
                e[1] = (u64)(c0 & 0xffff) | ((u64)(c1 & 0xffff) << 16) | ((u64)(c2 & 0xffff) << 32)
                       | ((u64)(c3 & 0xffff) << 48);
                e[2] = t;
                e[3] = clk;
            }
            n++;
        }
#endif
    }
    __device__ __forceinline__ void tile(int kind, int tensor, int c0, int c1, int c2, u32 bytes) {
        ev(kind, tensor, 3, c0, c1, c2, 0, bytes);
    }
    __device__ __forceinline__ void op(int kind, int name) { ev(kind, name, 0, 0, 0, 0, 0, 0); }
    __device__ __forceinline__ void finish() {
#ifdef IOSIM_TRACE
        if (threadIdx.x == 0) slot[0] = n;
#endif
    }
};
