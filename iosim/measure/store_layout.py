"""What a CTA's final store of its output tile costs, by store layout, bytes, storing threads
and how many SMs store at once (GPU only; imports cupy and nothing of the core).

    python3 -m iosim.measure.store_layout -o OUT.json

Kernel `store_phase`: one launch of `ctas` CTAs (dynamic shared memory sized so that 1 CTA fits
on an SM up to 132 CTAs, 2 beyond), all resident before any stores: thread 0 of every CTA
reads %globaltimer, the first CTA's reading becomes the epoch (atomicCAS), and every CTA
spins until epoch + 20 us, so they all start storing together. Then __syncthreads, clock64
(c0), the first `store_threads` threads store `store_bytes` (the CTA's own buffer),
__syncthreads, clock64 (c1: the threads have issued their stores), __threadfence +
__syncthreads, clock64 (c2: the stores are acknowledged), %globaltimer (t2).
Layouts:
  - "coalesced": 16-byte vector stores, a warp instruction writing 512 contiguous bytes (a tile
    staged through shared memory and copied out: flash-attention's / FA-3's / cuDNN's O);
  - "fragment": the mma accumulator-fragment layout of the project's kernels' O store
    (fa2_fwd.cu, fa3_fwd.cu: one 4-byte st.global per lane, a warp instruction writing 8 rows x
    16 bytes), rows of `row_bytes` (256: d 128 fp16, 128: d 64), each warp 16 rows at a time.
Figures per configuration (median of 5 launches of the per-launch medians over CTAs):
issue_cycles = c1 - c0, drain_cycles = c2 - c0 (clock64 of the storing CTA),
and the chip rate: all CTAs' bytes over (max t2 - epoch - spin), ns.
"""
from __future__ import annotations

import argparse
import json
import statistics

_SRC = r"""
extern "C" __global__ void store_phase(unsigned long long* rec, unsigned long long* epoch,
                                       int spin_ns, int store_bytes, int layout, int row_bytes,
                                       int store_threads, unsigned int* dst) {
    __shared__ unsigned long long s_deadline;
    if (threadIdx.x == 0) {
        unsigned long long g;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
        unsigned long long e = atomicCAS(epoch, 0ull, g);
        if (e == 0ull) e = g;
        s_deadline = e + (unsigned long long)spin_ns;
        unsigned long long now = g;
        while (now < s_deadline) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    }
    __syncthreads();
    long long c0 = clock64();
    if ((int)threadIdx.x < store_threads) {
        unsigned int* base = dst + (unsigned long long)blockIdx.x * (store_bytes / 4);
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = store_threads >> 5;
        if (layout == 0) {
            for (int e = threadIdx.x * 4; e < store_bytes / 4; e += store_threads * 4)
                *(uint4*)(base + e) = make_uint4(e, e, e, e);
        } else {
            const int words = row_bytes / 4, rows = store_bytes / row_bytes;
            for (int r16 = warp * 16; r16 < rows; r16 += nw * 16)
                for (int hf = 0; hf < 2; ++hf) {
                    unsigned int* row = base + (r16 + (lane >> 2) + hf * 8) * words + (lane & 3);
                    for (int n = 0; n < words / 4; ++n) row[n * 4] = n;
                }
        }
    }
    __syncthreads();
    long long c1 = clock64();
    __threadfence();
    __syncthreads();
    long long c2 = clock64();
    if (threadIdx.x == 0) {
        unsigned long long t2; unsigned int smid;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t2));
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        unsigned long long* r = rec + 4ull * blockIdx.x;
        r[0] = smid; r[1] = c1 - c0; r[2] = c2 - c0; r[3] = t2 - (s_deadline);
    }
}
"""

SPIN_NS = 20000
CTAS = (1, 8, 33, 66, 132, 264)
BYTES = (4096, 8192, 16384, 32768, 65536)
CONFIGS = (("coalesced", 256), ("fragment", 256), ("fragment", 128))
THREADS = (128, 256)


def measure(kern, cp, ctas, nbytes, layout, row_bytes, threads, reps=5):
    smem = 120 * 1024 if ctas <= 132 else 100 * 1024
    kern.max_dynamic_shared_size_bytes = smem
    rec = cp.zeros(4 * ctas, dtype=cp.uint64)
    epoch = cp.zeros(1, dtype=cp.uint64)
    dst = cp.zeros(ctas * nbytes // 4, dtype=cp.uint32)
    lay = 0 if layout == "coalesced" else 1
    issue, drain, span, smids = [], [], [], set()
    for rep in range(reps + 1):
        epoch.fill(0)
        kern((ctas,), (threads,), (rec, epoch, cp.int32(SPIN_NS), cp.int32(nbytes), cp.int32(lay),
                                   cp.int32(row_bytes), cp.int32(threads), dst), shared_mem=smem)
        cp.cuda.Device().synchronize()
        if rep == 0:
            continue                   # warm-up
        a = rec.get().reshape(ctas, 4)
        smids |= set(int(x) for x in a[:, 0])
        issue.append(statistics.median(float(x) for x in a[:, 1]))
        drain.append(statistics.median(float(x) for x in a[:, 2]))
        span.append(float(max(int(x) for x in a[:, 3])))
    med = statistics.median
    span_ns = med(span)
    return {"ctas": ctas, "store_bytes": nbytes, "layout": layout, "row_bytes": row_bytes,
            "threads": threads, "sms_seen": len(smids),
            "issue_cycles_median": med(issue), "drain_cycles_median": med(drain),
            "issue_bytes_per_cycle": nbytes / med(issue), "drain_bytes_per_cycle": nbytes / med(drain),
            "span_ns_median": span_ns,
            "chip_bytes_per_s": ctas * nbytes / (span_ns * 1e-9) if span_ns > 0 else None}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    import cupy as cp
    mod = cp.RawModule(code=_SRC, options=("-arch=sm_90",))
    kern = mod.get_function("store_phase")
    rows = []
    for layout, row_bytes in CONFIGS:
        for threads in THREADS:
            for nbytes in BYTES:
                for ctas in CTAS:
                    r = measure(kern, cp, ctas, nbytes, layout, row_bytes, threads)
                    rows.append(r)
                    print(json.dumps(r), flush=True)
    dev = cp.cuda.runtime.getDeviceProperties(0)
    json.dump({"device": dev["name"].decode(),
               "sm_count": cp.cuda.Device().attributes["MultiProcessorCount"],
               "method": __doc__, "command": "python3 -m iosim.measure.store_layout -o OUT.json",
               "rows": rows}, open(args.output, "w"), indent=1)


if __name__ == "__main__":
    main()
