"""How much two CTAs on one SM slow each other's fragment-layout stores, by how far apart they
start (docs/validation.md, "What the short project rows miss": 8 warps storing on one SM take
6-11 GB/s per SM where 4 take 12-18; the model's next form of this store is a per-SM path whose
rate falls when two CTAs' stores overlap, and it needs the curve).

One launch per configuration: 264 CTAs of 128 threads, two per SM (dynamic shared memory
sized so); on each SM the CTA that arrives second (a per-SM atomic counter) is the "second",
and every CTA spins until a common %globaltimer epoch + 20 us, the second ones a further
`offset_ns`. Then each CTA does its role's `work`:
  store  32 KB in the mma fragment layout (4-byte st.global per lane, a warp instruction
         writing 8 rows x 16 bytes; rows of `row_bytes`), as fa2_fwd.cu's O store;
  load   reads 32 KB with 16-byte ld.global.cg (a CTA's K/V tile traffic, no L1);
  none   nothing (a lone storer per SM).
Per CTA: %smid, clock64 from before to after its work and a __threadfence (the drain), and
%globaltimer then. Per configuration the medians over the first and the second residency's
CTAs (only SMs that ran one of each).

    python3 scripts/experiments/store_overlap_probe.py OUT.json
"""
from __future__ import annotations

import json
import statistics
import sys

SRC = r"""
extern "C" __global__ void overlap(unsigned long long* rec, unsigned long long* epoch, int spin_ns,
                                   int offset_ns, int work_first, int work_second, int row_bytes,
                                   unsigned int* dst, const int4* src, int* arrivals) {
    __shared__ unsigned long long s_deadline;
    __shared__ int s_second;
    if (threadIdx.x == 0) {
        unsigned int smid0;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid0));
        s_second = atomicAdd(arrivals + smid0, 1) > 0;
    }
    __syncthreads();
    const bool second = s_second;
    const int work = second ? work_second : work_first;
    if (threadIdx.x == 0) {
        unsigned long long g;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
        unsigned long long e = atomicCAS(epoch, 0ull, g);
        if (e == 0ull) e = g;
        s_deadline = e + (unsigned long long)spin_ns + (second ? (unsigned long long)offset_ns : 0ull);
        unsigned long long now = g;
        while (now < s_deadline) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    }
    __syncthreads();
    long long c0 = clock64();
    const int bytes = 32768;
    int acc = 0;
    if (work == 1) {
        unsigned int* base = dst + (unsigned long long)blockIdx.x * (bytes / 4);
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
        const int words = row_bytes / 4, rows = bytes / row_bytes;
        for (int r16 = warp * 16; r16 < rows; r16 += nw * 16)
            for (int hf = 0; hf < 2; ++hf) {
                unsigned int* row = base + (r16 + (lane >> 2) + hf * 8) * words + (lane & 3);
                for (int n = 0; n < words / 4; ++n) row[n * 4] = n;
            }
    } else if (work == 2) {
        const int4* base = src + (unsigned long long)blockIdx.x * (bytes / 16);
        for (int i = threadIdx.x; i < bytes / 16; i += blockDim.x) { int4 v = __ldcg(base + i); acc ^= v.x; }
    }
    __threadfence();
    __syncthreads();
    long long c1 = clock64();
    if (threadIdx.x == 0) {
        unsigned long long t; unsigned int smid;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        unsigned long long* r = rec + 4ull * blockIdx.x;
        r[0] = smid; r[1] = c1 - c0; r[2] = t - s_deadline;
        r[3] = (unsigned long long)second | ((unsigned long long)(acc & 1) << 8);
    }
}
"""
WORK = {"none": 0, "store": 1, "load": 2}
OFFSETS_NS = (0, 500, 1000, 2000, 4000, 8000, 16000)
PAIRS = (("store", "store"), ("store", "none"), ("store", "load"))
ROW_BYTES = (128, 256)
SPIN_NS = 20000


def run(kern, cp, first, second, offset_ns, row_bytes, reps=5):
    ctas = 264
    rec = cp.zeros(4 * ctas, dtype=cp.uint64)
    epoch = cp.zeros(1, dtype=cp.uint64)
    dst = cp.zeros(ctas * 32768 // 4, dtype=cp.uint32)
    src = cp.ones(ctas * 32768 // 16 * 4, dtype=cp.int32)
    arrivals = cp.zeros(1024, dtype=cp.int32)
    drains = {"first": [], "second": []}
    ends = {"first": [], "second": []}
    for rep in range(reps + 1):
        epoch.fill(0)
        arrivals.fill(0)
        kern((ctas,), (128,), (rec, epoch, cp.int32(SPIN_NS), cp.int32(offset_ns), cp.int32(WORK[first]),
                               cp.int32(WORK[second]), cp.int32(row_bytes), dst, src, arrivals),
             shared_mem=100 * 1024)
        cp.cuda.Device().synchronize()
        if rep == 0:
            continue
        a = rec.get().reshape(ctas, 4)
        role = [int(a[i, 3]) & 1 for i in range(ctas)]
        sm_first = {int(a[i, 0]) for i in range(ctas) if role[i] == 0}
        sm_second = {int(a[i, 0]) for i in range(ctas) if role[i] == 1}
        both = sm_first & sm_second
        for who, want in (("first", 0), ("second", 1)):
            sel = [i for i in range(ctas) if role[i] == want and int(a[i, 0]) in both]
            drains[who].append(statistics.median(float(a[i, 1]) for i in sel))
            ends[who].append(statistics.median(float(a[i, 2]) for i in sel))
    med = statistics.median
    return {"first": first, "second": second, "offset_ns": offset_ns, "row_bytes": row_bytes,
            "sms_with_both": len(both),
            "first_drain_cycles": med(drains["first"]), "second_drain_cycles": med(drains["second"]),
            "first_end_ns": med(ends["first"]), "second_end_ns": med(ends["second"])}


def main(out: str) -> None:
    import cupy as cp
    kern = cp.RawModule(code=SRC, options=("-arch=sm_90",)).get_function("overlap")
    kern.max_dynamic_shared_size_bytes = 100 * 1024
    rows = []
    for row_bytes in ROW_BYTES:
        for first, second in PAIRS:
            for off in OFFSETS_NS if second != "none" else (0,):
                r = run(kern, cp, first, second, off, row_bytes)
                rows.append(r)
                print(json.dumps(r), flush=True)
    dev = cp.cuda.runtime.getDeviceProperties(0)
    json.dump({"device": dev["name"].decode(), "method": __doc__,
               "command": "python3 scripts/experiments/store_overlap_probe.py OUT.json",
               "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
