"""How fast the block scheduler starts CTAs on one SM when many small CTAs queue: the rate limit
behind kernels of many short CTAs (standard attention's softmax kernel: 65,536 CTAs of 128
threads at N 512).

    python3 scripts/cta_launch_rate_h200.py OUT.json

Kernel `probe`: thread 0 reads %globaltimer and %smid at entry; all threads spin until `spin_ns`
have passed (0: no spin); thread 0 writes the record; the CTA exits. Grid = 132 x per_sm x waves
CTAs of `threads` threads, `smem` bytes of dynamic shared memory (resident CTAs per SM limited by
threads, 2048 per SM, or by shared memory). Per variant: the kernel's CUDA-event time (median of
10 after 2 warm-ups) and, from the records, per SM the entries sorted by time; `entry_gap_ns`:
the median gap between consecutive CTA entries on one SM after the first 2 x resident CTAs
(the steady state, where every entry is a refill), `ctas_per_us_per_sm` = 1000 / gap.
"""
import json
import statistics as st
import sys

import cupy as cp
import numpy as np

SRC = r"""
extern "C" __global__ void probe(unsigned long long* rec, int spin_ns) {
    extern __shared__ unsigned char smem[];
    unsigned long long t0, now;
    unsigned int smid;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    if (threadIdx.x == 0) smem[0] = 1;
    now = t0;
    while (now - t0 < (unsigned long long)spin_ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        unsigned long long* r = rec + 2ull * (blockIdx.x + (unsigned long long)gridDim.x * blockIdx.y);
        r[0] = smid; r[1] = t0;
    }
}
"""

SMS = 132


def main(out: str) -> None:
    k = cp.RawModule(code=SRC).get_function("probe")
    k.max_dynamic_shared_size_bytes = 200 * 1024
    rows = []
    for threads, smem, spin in [(128, 0, 0), (128, 0, 2000), (128, 4096, 0), (128, 16384, 0),
                                (256, 0, 0), (512, 0, 0), (32, 0, 0), (128, 65536, 0)]:
        per_sm = min(2048 // threads, 32, (228 * 1024) // (smem + 1024) if smem else 32)
        n = SMS * per_sm * 24
        rec = cp.zeros(2 * n, dtype=cp.uint64)
        args = ((n, 1), (threads,), (rec, np.int32(spin)))
        for _ in range(2):
            k(*args[:2], args[2], shared_mem=max(smem, 16))
        cp.cuda.runtime.deviceSynchronize()
        times = []
        for _ in range(10):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record()
            k(*args[:2], args[2], shared_mem=max(smem, 16))
            b.record()
            b.synchronize()
            times.append(cp.cuda.get_elapsed_time(a, b) * 1e-3)
        r = cp.asnumpy(rec).reshape(-1, 2)
        by_sm = {}
        for smid, t0 in r:
            by_sm.setdefault(int(smid), []).append(int(t0))
        gaps = []
        for ts in by_sm.values():
            ts.sort()
            d = np.diff(ts[2 * per_sm:])
            gaps.extend(d.tolist())
        gap = float(np.median(gaps)) if gaps else float("nan")
        span = max(max(v) for v in by_sm.values()) - min(min(v) for v in by_sm.values())
        row = {"threads": threads, "smem_bytes": smem, "spin_ns": spin, "resident_per_sm": per_sm,
               "ctas": n, "time_s": st.median(times), "sms_seen": len(by_sm),
               "entry_gap_ns_median": gap, "entry_gap_ns_p10": float(np.percentile(gaps, 10)),
               "entry_gap_ns_p90": float(np.percentile(gaps, 90)),
               "entries_span_ns": span, "ns_per_cta_per_sm": st.median(times) * 1e9 * SMS / n}
        rows.append(row)
        print(f"threads {threads:4d} smem {smem:6d} spin {spin:5d} per_sm {per_sm:2d} ctas {n:7d}: "
              f"{row['time_s'] * 1e6:8.1f} us, {row['ns_per_cta_per_sm']:6.1f} ns/CTA/SM, "
              f"entry gap median {gap:6.1f} ns (p10 {row['entry_gap_ns_p10']:.0f}, p90 {row['entry_gap_ns_p90']:.0f})",
              flush=True)
    json.dump({"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
               "method": __doc__.strip().splitlines()[-6:], "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
