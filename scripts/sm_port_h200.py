"""What one SM can pull from the L2 (and from DRAM) with TMA bulk copies: the per-SM L2→SM
port rate (GpuSpec.sm_l2_read_bandwidth_bytes_per_s) that bounds a CTA's prologue (Q, K₀, V₀
arriving together) however idle the rest of the chip is.

    python3 scripts/sm_port_h200.py OUT.json

Kernel `bulk_stream`: one thread per CTA issues `cp.async.bulk` global→shared copies of
`chunk` bytes into a ring of `stages` shared-memory slots, each with its mbarrier
(expect_tx + complete_tx); a slot is refilled as soon as its copy has landed, so
stages × chunk bytes are in flight. `l2`: every CTA cycles through the same 8 MiB buffer
(L2-resident after a warm-up launch); `dram`: each CTA reads its own 48 MiB once (the buffer,
132 × 48 MiB, is 10× the L2). Per CTA: bytes / (%globaltimer after its last copy landed −
before its first was issued); the median over CTAs, then over 5 launches. One CTA per SM
(≥ 100 KB of dynamic shared memory each): 1, 8, 33, 66, 132 CTAs.
"""
import json
import statistics as st
import sys

import cupy as cp
import numpy as np

SRC = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
__device__ __forceinline__ u64 gtime() { u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ u32 s32(const void* p) { return (u32)__cvta_generic_to_shared(p); }
extern "C" __global__ void bulk_stream(const char* __restrict__ src, u64 region, u64 per_cta_offset,
                                       u64 bytes, int chunk, int stages, u64* rec) {
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) u64 bars[16];
    if (threadIdx.x != 0) return;
    for (int s = 0; s < stages; ++s)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(s32(&bars[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    const char* base = src + (u64)blockIdx.x * per_cta_offset;
    const u64 n = bytes / chunk;
    const u64 t0 = gtime();
    for (u64 i = 0; i < n + stages; ++i) {
        const int s = (int)(i % stages);
        const u32 bar = s32(&bars[s]);
        if (i >= (u64)stages) {          // wait for the copy issued stages steps ago
            const u32 parity = (u32)(((i / stages) - 1) & 1);
            u32 done = 0;
            while (!done)
                asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                             "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
        }
        if (i < n) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(chunk) : "memory");
            const char* g = base + (i * (u64)chunk) % region;
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                         :: "r"(s32(smem + (u64)s * chunk)), "l"(g), "r"(chunk), "r"(bar) : "memory");
        }
    }
    const u64 t1 = gtime();
    u32 smid; asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    rec[3 * blockIdx.x] = t0; rec[3 * blockIdx.x + 1] = t1; rec[3 * blockIdx.x + 2] = smid;
}
"""

SMS = 132
MiB = 1 << 20


def main(out: str) -> None:
    mod = cp.RawModule(code=SRC)
    k = mod.get_function("bulk_stream")
    k.max_dynamic_shared_size_bytes = 200 * 1024
    buf = cp.zeros(SMS * 48 * MiB, dtype=cp.uint8)
    rec = cp.zeros(3 * SMS, dtype=cp.uint64)
    rows = []
    for source in ("l2", "dram"):
        for chunk, stages in [(16384, 2), (16384, 4), (32768, 3), (32768, 6), (65536, 3)]:
            for ctas in (1, 8, 33, 66, 132):
                if source == "l2":
                    region, off, nbytes = 8 * MiB, 0, 64 * MiB
                else:
                    region, off, nbytes = 48 * MiB, 48 * MiB, 48 * MiB
                smem = max(chunk * stages, 100 * 1024)        # one CTA per SM
                args = (buf, np.uint64(region), np.uint64(off), np.uint64(nbytes), np.int32(chunk),
                        np.int32(stages), rec)
                if source == "l2":
                    k((ctas,), (32,), args, shared_mem=smem)   # warm the L2
                rates = []
                for _ in range(5):
                    k((ctas,), (32,), args, shared_mem=smem)
                    cp.cuda.runtime.deviceSynchronize()
                    r = cp.asnumpy(rec[:3 * ctas]).reshape(-1, 3).astype(np.float64)
                    rates.append(float(np.median(nbytes / (r[:, 1] - r[:, 0]))))   # bytes per ns
                row = {"source": source, "chunk_bytes": chunk, "stages": stages,
                       "inflight_bytes": chunk * stages, "ctas": ctas,
                       "gb_per_s_per_cta": st.median(rates), "gb_per_s_total": st.median(rates) * ctas,
                       "distinct_sms": int(len(set(cp.asnumpy(rec[2:3 * ctas:3]).tolist())))}
                rows.append(row)
                print(f"{source:4s} chunk {chunk:6d} x {stages} ({chunk * stages // 1024:4d} KiB in flight) "
                      f"ctas {ctas:3d}: {row['gb_per_s_per_cta']:7.1f} GB/s per CTA, "
                      f"{row['gb_per_s_total']:7.0f} total (SMs {row['distinct_sms']})", flush=True)
    json.dump({"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
               "method": __doc__.strip(), "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
