"""CTA turnover on one SM slot: the time from a CTA's last instruction to the first instruction
of the next CTA the block scheduler puts into the same slot (retirement + launch), and whether
stores still in flight at a CTA's exit delay it.

    python3 scripts/cta_turnover_h200.py OUT.json

Kernel `turnover`: thread 0 reads %globaltimer and clock64 at entry; all threads spin until
`spin_ns` have passed; optionally every warp stores `store_bytes` per CTA (layout 0: coalesced
16-byte vector stores, a warp writing 512 contiguous bytes; layout 1: the mma accumulator
fragment layout of fa2_fwd.cu's O store, a warp instruction writing 8 rows x 16 bytes); then
__syncthreads and thread 0 reads both clocks again and writes the record; the CTA exits.
Grid = 132 x waves CTAs, dynamic shared memory sized so that `per_sm` CTAs fit on an SM.
Per SM the CTAs are sorted by entry time; gap = next entry - previous exit record (clock64
cycles, same SM counter; ns from %globaltimer). Medians over all SMs and waves after the first.
"""
import json, sys, statistics as st
import cupy as cp

SRC = r"""
extern "C" __global__ void turnover(unsigned long long* rec, int spin_ns, int store_bytes,
                                    int layout, unsigned int* dst) {
    extern __shared__ unsigned char smem[];
    unsigned long long t0, c0, t1, c1;
    unsigned int smid;
    if (threadIdx.x == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        c0 = clock64();
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        smem[0] = 1;
    }
    unsigned long long s;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(s));
    unsigned long long now = s;
    while (now - s < (unsigned long long)spin_ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (store_bytes > 0) {
        unsigned int* base = dst + (unsigned long long)blockIdx.x * (store_bytes / 4);
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
        if (layout == 0) {
            for (int e = threadIdx.x * 4; e < store_bytes / 4; e += blockDim.x * 4)
                *(uint4*)(base + e) = make_uint4(e, e, e, e);
        } else {   // rows of 128 x 2-byte columns (d 128): 64 u32 per row; warp = 16 rows
            const int rows = store_bytes / 256;
            for (int r16 = warp * 16; r16 < rows; r16 += nw * 16)
                for (int hf = 0; hf < 2; ++hf) {
                    unsigned int* row = base + (r16 + (lane >> 2) + hf * 8) * 64 + (lane & 3);
#pragma unroll
                    for (int n = 0; n < 16; ++n) row[n * 4] = n;
                }
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
        c1 = clock64();
        unsigned long long* r = rec + 5ull * blockIdx.x;
        r[0] = smid; r[1] = t0; r[2] = c0; r[3] = t1; r[4] = c1;
    }
}
"""


def run(kern, sms, per_sm, threads, spin_ns, store_bytes, layout, waves=24):
    n = sms * per_sm * waves
    smem_per_sm = 228 * 1024
    smem = min(227 * 1024, smem_per_sm // per_sm - 2048)
    kern.max_dynamic_shared_size_bytes = smem
    rec = cp.zeros(5 * n, dtype=cp.uint64)
    dst = cp.zeros(max(1, n * store_bytes // 4), dtype=cp.uint32)
    for _ in range(2):   # warm-up + measured
        kern((n,), (threads,), (rec, cp.int32(spin_ns), cp.int32(store_bytes), cp.int32(layout), dst),
             shared_mem=smem)
    cp.cuda.Device().synchronize()
    a = rec.get().reshape(n, 5).astype(float)
    by_sm = {}
    for r in a:
        by_sm.setdefault(int(r[0]), []).append(tuple(r))
    gaps_clk, gaps_ns, dur_ns, resident = [], [], [], []
    for sm, rs in by_sm.items():
        rs.sort(key=lambda r: r[1])
        # with per_sm slots the successor of a CTA in its slot: the next CTA to enter after it ended
        ends = []
        for r in rs:
            dur_ns.append(r[3] - r[1])
            if r[1] > rs[0][3]:       # not in the first wave on this SM
                prev = max((e for e in ends if e[3] <= r[1]), key=lambda e: e[3], default=None)
                if prev is not None:
                    gaps_ns.append(r[1] - prev[3])
                    gaps_clk.append(r[2] - prev[4])
                    ends.remove(prev)
            ends.append(r)
        resident.append(len(rs))
    med = lambda x: st.median(x) if x else None
    q = lambda x, p: sorted(x)[int(p * (len(x) - 1))] if x else None
    return {"per_sm": per_sm, "threads": threads, "spin_ns": spin_ns, "store_bytes": store_bytes,
            "layout": ["coalesced", "fragment"][layout], "ctas": n, "sms_seen": len(by_sm),
            "gap_ns_median": med(gaps_ns), "gap_ns_p10": q(gaps_ns, 0.1), "gap_ns_p90": q(gaps_ns, 0.9),
            "gap_cycles_median": med(gaps_clk), "gap_cycles_p10": q(gaps_clk, 0.1),
            "gap_cycles_p90": q(gaps_clk, 0.9), "gaps": len(gaps_ns),
            "cta_ns_median": med(dur_ns)}


def main(out):
    mod = cp.RawModule(code=SRC, options=("-arch=sm_90",))
    kern = mod.get_function("turnover")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    rows = []
    for per_sm, threads in ((1, 128), (1, 384), (2, 128), (1, 512)):
        for spin in (2000, 8000):
            rows.append(run(kern, sms, per_sm, threads, spin, 0, 0))
            print(rows[-1], flush=True)
    for layout in (0, 1):
        for nbytes in (16384, 32768):
            for per_sm, threads in ((1, 128), (1, 384), (2, 128)):
                rows.append(run(kern, sms, per_sm, threads, 4000, nbytes, layout))
                print(rows[-1], flush=True)
    dev = cp.cuda.runtime.getDeviceProperties(0)
    json.dump({"device": dev["name"].decode(), "sm_count": sms, "method": __doc__,
               "command": "python3 scripts/cta_turnover_h200.py OUT.json", "rows": rows},
              open(out, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
