"""What one SM can stream from DRAM, and the memory latency: the microbenchmarks behind the
simulator's per-SM memory-parallelism limit (GpuSpec.sm_inflight_bytes_max; docs/simulator.md).

    python3 scripts/sm_stream_h200.py OUT.json

1. Pointer chase (one thread, `ld.global.cg` so every step goes to L2): `dram`: 20,000
   dependent loads over 512 MiB, lines visited in a random order inside each 2 MiB region and
   the regions in order (every step misses L2, the TLB mostly hits, as a stream's does);
   `l2`: the same over 4 MiB after one warm pass (every step hits L2). ns per step from
   %globaltimer, cycles from clock64. Each DRAM run walks on from where the last one ended
   (new lines). The committed measurements/h200/decode/sm_stream_h200.json came from the
   first version (commit 9a4f2df), whose runs all started at line 0: only its first DRAM run
   (331 ns) missed L2, the other two (141 ns) re-read lines the first had left there.
2. Stream: CTAs of NT threads, each reading its own 16 MiB with 16-byte `cp.async.cg` into a
   shared-memory ring of STAGES tiles of TILE bytes, refilled as fd_split does (tile t +
   STAGES - 1 issued before tile t is awaited, so STAGES tiles are in flight at each wait).
   Per CTA: bytes / (%globaltimer at its end - at its start); the median over CTAs and 3 runs.
   One CTA per variant (bytes in flight 16 KiB ... 192 KiB); then fd_split's ring (2 x 64 KiB,
   128 threads) with 1, 8, 32, 66 and 132 CTAs (one per SM).
3. Loaded latency: the DRAM chase in CTA 0 while N other CTAs stream (2 x 64 KiB ring).
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

SRC = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
__device__ __forceinline__ u64 gtime() { u64 t; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ u32 ldcg(const u32* p) { u32 v; asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p)); return v; }
__device__ __forceinline__ void chase_body(const u32* nxt, u32 start, int warm, int steps, u64* out) {
    u32 j = start;
    for (int i = 0; i < warm; ++i) j = ldcg(nxt + j);
    const u64 t0 = gtime();
    const long long c0 = clock64();
    for (int i = 0; i < steps; ++i) j = ldcg(nxt + j);
    const long long c1 = clock64();
    const u64 t1 = gtime();
    out[0] = t1 - t0; out[1] = (u64)(c1 - c0); out[2] = j;
}
extern "C" __global__ void chase(const u32* nxt, u32 start, int warm, int steps, u64* out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) chase_body(nxt, start, warm, steps, out);
}
#ifdef TILE
extern "C" __global__ void __launch_bounds__(NT) stream(const char* src, long long bytes_per_cta,
        const u32* nxt, u32 start, int chase_steps, u64* out) {
    extern __shared__ __align__(128) unsigned char smem[];
    if (chase_steps > 0 && blockIdx.x == 0) {
        if (threadIdx.x == 0) chase_body(nxt, start, 0, chase_steps, out);
        return;
    }
    const char* base = src + (long long)blockIdx.x * bytes_per_cta;
    const int ntiles = (int)(bytes_per_cta / TILE);
    const u32 s0 = (u32)__cvta_generic_to_shared(smem);
    auto issue = [&](int t) {
        const u32 dst = s0 + (t % STAGES) * TILE;
        const char* g = base + (long long)t * TILE;
        for (int c = threadIdx.x; c < TILE / 16; c += NT)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst + c * 16), "l"(g + c * 16));
    };
    __syncthreads();
    const u64 t0 = gtime();
    for (int p = 0; p < STAGES - 1; ++p) { if (p < ntiles) issue(p); asm volatile("cp.async.commit_group;"); }
    u32 acc = 0;
    for (int t = 0; t < ntiles; ++t) {
        __syncthreads();
        if (t + STAGES - 1 < ntiles) issue(t + STAGES - 1);
        asm volatile("cp.async.commit_group;");
        asm volatile("cp.async.wait_group %0;" :: "n"(STAGES - 1));
        __syncthreads();
        acc += ((const u32*)smem)[(t % STAGES) * (TILE / 4) + threadIdx.x];
    }
    asm volatile("cp.async.wait_all;");
    __syncthreads();
    const u64 t1 = gtime();
    if (threadIdx.x == 0) { out[8 + 2 * blockIdx.x] = t1 - t0; out[9 + 2 * blockIdx.x] = acc; }
}
#endif
"""

PER_CTA = 16 << 20
KI = 1024
SINGLE = [(16 * KI, 1, 128), (16 * KI, 2, 128), (16 * KI, 4, 128), (16 * KI, 8, 128), (16 * KI, 12, 128),
          (64 * KI, 2, 128), (64 * KI, 3, 128), (32 * KI, 4, 256), (32 * KI, 6, 512)]
RING = (64 * KI, 2, 128)      # fd_split at d 128: 128-key K + V tiles (64 KiB), 2 stages


def chain(total_bytes: int, region_bytes: int, rng) -> np.ndarray:
    """next[] of a single cycle over 128-byte lines: random order inside each region, regions
    in order."""
    words = total_bytes // 4
    line = 32                                   # u32 words per 128-byte line
    per = region_bytes // 128
    order = np.concatenate([r * per + rng.permutation(per) for r in range(total_bytes // region_bytes)])
    nxt = np.zeros(words, dtype=np.uint32)
    nxt[order * line] = np.roll(order, -1) * line
    return nxt


def main(path: str) -> None:
    import cupy as cp
    rng = np.random.default_rng(0)
    res = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
           "measured_on": time.strftime("%Y-%m-%d"), "method": __doc__}
    base = cp.RawModule(code=SRC, options=("-std=c++17",))
    chase = base.get_function("chase")
    out = cp.zeros(4096, dtype=cp.uint64)
    dram = cp.asarray(chain(512 << 20, 2 << 20, rng))
    l2 = cp.asarray(chain(4 << 20, 4 << 20, rng))
    pos = {"dram": 0, "l2": 0}     # each run walks on along the cycle: new lines every DRAM run
    for name, buf, warm, steps in (("dram", dram, 0, 20000), ("l2", l2, 32768, 20000)):
        vals = []
        for rep in range(3):
            chase((1,), (32,), (buf, np.uint32(pos[name]), np.int32(warm), np.int32(steps), out))
            cp.cuda.runtime.deviceSynchronize()
            ns, cyc = int(out[0]), int(out[1])
            if name == "dram":
                pos[name] = int(out[2])
            vals.append((ns / steps, cyc / steps))
        res[f"chase_{name}_ns"] = float(np.median([v[0] for v in vals]))
        res[f"chase_{name}_cycles"] = float(np.median([v[1] for v in vals]))
        res[f"chase_{name}_ns_runs"] = [round(v[0], 1) for v in vals]
    print({k: v for k, v in res.items() if k.startswith("chase")}, flush=True)

    src = cp.ones(133 * PER_CTA // 2, dtype=cp.uint16)
    kernels = {}

    def kern(tile, stages, nt):
        key = (tile, stages, nt)
        if key not in kernels:
            m = cp.RawModule(code=SRC, options=("-std=c++17", f"-DTILE={tile}", f"-DSTAGES={stages}", f"-DNT={nt}"))
            f = m.get_function("stream")
            f.max_dynamic_shared_size_bytes = tile * stages
            kernels[key] = f
        return kernels[key]

    def run(tile, stages, nt, ctas, chase_steps=0):
        f = kern(tile, stages, nt)
        rates = []
        for rep in range(3):
            out[:] = 0
            f((ctas + (1 if chase_steps else 0),), (nt,),
              (src, np.int64(PER_CTA), dram, np.uint32(pos["dram"]), np.int32(chase_steps), out),
              shared_mem=tile * stages)
            cp.cuda.runtime.deviceSynchronize()
            if chase_steps:
                pos["dram"] = int(out[2])
            o = cp.asnumpy(out[: 8 + 2 * (ctas + 1)]).astype(np.float64)
            first = 1 if chase_steps else 0
            ns = o[8 + 2 * first: 8 + 2 * (first + ctas): 2]
            rates.extend(PER_CTA / ns)          # bytes per ns = GB/s
            lat = o[0] / chase_steps if chase_steps else None
        return float(np.median(rates)), lat

    res["single_cta"] = []
    for tile, stages, nt in SINGLE:
        gbs, _ = run(tile, stages, nt, 1)
        row = {"tile_bytes": tile, "stages": stages, "threads": nt, "inflight_bytes": tile * stages,
               "gb_per_s": round(gbs, 2)}
        res["single_cta"].append(row)
        print(row, flush=True)
    res["fd_split_ring"] = []
    for ctas in (1, 8, 32, 66, 132):
        gbs, _ = run(*RING, ctas)
        row = {"ctas": ctas, "gb_per_s_per_cta": round(gbs, 2), "gb_per_s_total": round(gbs * ctas, 1)}
        res["fd_split_ring"].append(row)
        print(row, flush=True)
    res["loaded_chase"] = []
    for ctas in (32, 131):
        gbs, lat = run(*RING, ctas, chase_steps=400)
        row = {"streaming_ctas": ctas, "gb_per_s_per_cta": round(gbs, 2), "chase_dram_ns": round(lat, 1)}
        res["loaded_chase"].append(row)
        print(row, flush=True)
    with open(path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
