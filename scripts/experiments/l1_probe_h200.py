"""L1 hit probability of 4-byte cp.async.ca loads against the bytes stored between two reads
(H200), FA-1's row-statistic pattern without its arithmetic: one CTA per SM (132 CTAs, 256
threads, a dynamic shared-memory request that fits one CTA per SM and so sets the carve-out),
each over its own buffers. Per step i of a pass over n steps: the two 256-byte statistic tiles
l_i, m_i are read by 64 threads' cp.async.ca 4-byte copies, then a `fill`-byte tile F_i
(FA-1's O_i: 128-byte rows) is stored, then l_i and m_i are stored (FA-1's pattern: lane
l % 4 == 0 of warps 0..3 writes row 16 w + l / 4 + 8 hf). Before the first pass every F_i, l_i,
m_i is stored once (FA-1's init). So a statistic line is read (n - 1) (fill + 512) + 256 bytes
of other stored lines after it was last written: its stack distance.

mode bits: 1 = F_i stored coalesced (16-byte st.global, consecutive threads) instead of in
FA-1's fragment layout (4-byte st.global, 8 rows x 16 bytes per warp instruction); 2 = also
cp.async.cg loads of fill bytes per step before the statistics (FA-1's Q_i, O_i copies);
4 = no F_i stores at all (only with 2: do .cg loads allocate in L1?).

Nsight Compute reads the L1 counters of the .ca copies (LDGSTS cache_access sectors, lookup
hits) and the shared-memory configuration of every launch:
    bash scripts/experiments/l1_probe_h200.sh OUTDIR
"""
from __future__ import annotations

import json
import sys

SRC = r"""
typedef unsigned int u32;
__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp_async4(u32 dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, 4;" :: "r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async16(u32 dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, 16;" :: "r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void store_fill(unsigned char* f, int fill_bytes, int mode, u32 v, int tid) {
    if (mode & 4) return;
    const int lane = tid & 31, warp = tid >> 5;
    if (mode & 1) {
        for (int c = tid; c < fill_bytes / 16; c += 256)
            ((uint4*)f)[c] = make_uint4(v, v + 1, v + 2, v + 3);
    } else {
        const int tiles = fill_bytes / 128 / 16;
        for (int t = warp; t < tiles; t += 8)
            for (int hf = 0; hf < 2; ++hf)
#pragma unroll
                for (int n = 0; n < 8; ++n) {
                    const int row = t * 16 + (lane >> 2) + hf * 8;
                    *(u32*)(f + row * 128 + n * 16 + (lane & 3) * 4) = v + n;
                }
    }
}
__device__ __forceinline__ void store_stat(float* s, float v, int tid) {
    const int lane = tid & 31, warp = tid >> 5;
    if (warp < 4 && (lane & 3) == 0)
        for (int hf = 0; hf < 2; ++hf) s[warp * 16 + (lane >> 2) + hf * 8] = v + hf;
}
extern "C" __global__ void __launch_bounds__(256, 1)
l1_probe(unsigned char* fill, float* stat, int n, int fill_bytes, int passes, int mode) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x;
    unsigned char* f = fill + (size_t)blockIdx.x * n * fill_bytes;
    float* l = stat + (size_t)blockIdx.x * n * 128;
    float* m = l + n * 64;
    const u32 s_l = smem_u32(smem), s_m = s_l + 256, s_x = s_l + 512;
    for (int i = 0; i < n; ++i) {
        store_fill(f + (size_t)i * fill_bytes, fill_bytes, mode, (u32)i, tid);
        store_stat(l + i * 64, 0.f, tid);
        store_stat(m + i * 64, -1.f, tid);
    }
    __threadfence_block();
    __syncthreads();
    float acc = 0.f;
    for (int p = 0; p < passes; ++p)
        for (int i = 0; i < n; ++i) {
            if (mode & 2)
                for (int c = tid; c < fill_bytes / 16; c += 256)
                    cp_async16(s_x + 16 * c, f + (size_t)i * fill_bytes + 16 * c);
            if (tid < 64) {
                cp_async4(s_l + 4 * tid, l + i * 64 + tid);
                cp_async4(s_m + 4 * tid, m + i * 64 + tid);
            }
            asm volatile("cp.async.commit_group;" ::: "memory");
            asm volatile("cp.async.wait_group 0;" ::: "memory");
            __syncthreads();
            const float* ls = (const float*)smem;
            acc += ls[tid & 63] + ls[64 + (tid & 63)];
            store_fill(f + (size_t)i * fill_bytes, fill_bytes, mode, (u32)(p * n + i) + (u32)acc, tid);
            store_stat(l + i * 64, acc, tid);
            store_stat(m + i * 64, acc + 1.f, tid);
            __threadfence_block();
            __syncthreads();
        }
}
"""

FILL = 8192          # FA-1's O_i at d 64, Br 64 (64 rows x 128 bytes)
# dynamic shared memory per CTA -> the carve-out the driver picks (one CTA per SM: > 114 KB)
SMEM = {132: 120 * 1024, 164: 147 * 1024, 196: 180 * 1024, 228: 220 * 1024}


def launches() -> list[dict]:
    out = []
    for carve, steps in ((164, list(range(2, 14)) + list(range(14, 40, 2))),
                         (228, list(range(2, 14))), (196, list(range(2, 22))),
                         (132, list(range(4, 52, 3)))):
        out += [dict(carve_kb=carve, n=n, fill=FILL, mode=0) for n in steps]
    # at FA-1's carve-out: coalesced fill stores, FA-1's .cg copies added, .cg copies alone
    out += [dict(carve_kb=164, n=n, fill=FILL, mode=1) for n in (4, 8, 10, 12, 16, 20)]
    out += [dict(carve_kb=164, n=n, fill=FILL, mode=2) for n in (4, 8, 10, 12, 16, 20)]
    out += [dict(carve_kb=164, n=n, fill=FILL, mode=6) for n in (8, 16, 32)]
    # another tile size at FA-1's carve-out (d 128 x 64 rows: 16 KB; 2 KB tiles)
    out += [dict(carve_kb=164, n=n, fill=16384, mode=0) for n in (3, 5, 6, 7, 9, 12)]
    out += [dict(carve_kb=164, n=n, fill=2048, mode=0) for n in (20, 30, 40, 50, 70)]
    for x in out:
        x["passes"] = 3
        x["stack_distance_bytes"] = (x["n"] - 1) * ((0 if x["mode"] & 4 else x["fill"]) + 512) + 256
    return out


def main(out_json: str) -> None:
    import cupy as cp
    import numpy as np
    mod = cp.RawModule(code=SRC, options=("-std=c++17",))
    k = mod.get_function("l1_probe")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    todo = launches()
    nmax = max(x["n"] * x["fill"] for x in todo)
    fill = cp.zeros(sms * nmax, dtype=cp.uint8)
    stat = cp.zeros(sms * max(x["n"] for x in todo) * 128, dtype=cp.float32)
    for x in todo:
        smem = SMEM[x["carve_kb"]]
        k.max_dynamic_shared_size_bytes = smem
        k((sms,), (256,), (fill, stat, np.int32(x["n"]), np.int32(x["fill"]), np.int32(x["passes"]),
                           np.int32(x["mode"])), shared_mem=smem)
        x["smem_dynamic_bytes"] = smem
    cp.cuda.Device().synchronize()
    json.dump({"sms": sms, "launches": todo}, open(out_json, "w"), indent=1)
    print(len(todo), "launches")


if __name__ == "__main__":
    main(sys.argv[1])
