"""The DRAM's latency under load (one device call): a chain of dependent loads timed while a
background kernel streams a controlled rate through the DRAM.

The method of a loaded-latency curve (a pointer chase beside a traffic generator whose
intensity is stepped): the background kernel runs one CTA per SM (dynamic shared memory
forces it; one SM is left to the probe) of W warps, each warp reading its 2-KB chunk (4 × 16 B per lane, `ld.global.cg`,
the softmax kernel's trip) and looping over a 4-GiB buffer for a fixed time; with --write it
also stores each chunk to a second buffer (a 1:1 read:write stream, as the softmax's S in,
P out). Its rate is its bytes over its own %globaltimer span. Beside it, on another stream,
one CTA runs the probe after a 3 ms delay (the background at its rate by then):

- `chase`: one thread, a pointer chase over 128-B lines in random order (one line per step,
  each address the value the last load returned), over a 256-MiB region (more than the L2,
  few pages: the DRAM's latency, not the TLB's) and a 4-GiB one;
- `trip`: one warp, each step a 2-KB chunk (4 × 16 B per lane) whose address is the first
  word the previous chunk returned (the softmax's dependent row-copy trips).

Each probe: `steps` dependent accesses timed with %globaltimer and clock64; the figure is
the mean per step. Everything is run with no background first (the unloaded latency).

    python3 scripts/experiments/dram_loaded_latency.py -o dram_loaded_latency.json
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

SRC = r"""
extern "C" __device__ unsigned long long gtime() {
    unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}

extern "C" __global__ void background(const int4* __restrict__ src, int4* __restrict__ dst,
        unsigned long long chunks, unsigned long long duration_ns, int write,
        unsigned long long* bytes, unsigned long long* span, int4* sink) {
    extern __shared__ int4 pad[];
    const int lane = threadIdx.x & 31;
    const unsigned long long warp = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) >> 5;
    const unsigned long long warps = (gridDim.x * (unsigned long long)blockDim.x) >> 5;
    unsigned long long c = warp, it = 0;
    int4 acc = make_int4(0, 0, 0, 0);
    const unsigned long long t0 = gtime();
    unsigned long long t = t0;
    while (t - t0 < duration_ns) {
        const int4* p = src + (c % chunks) * 128;
        int4 a = __ldcg(p + lane), b = __ldcg(p + 32 + lane), d = __ldcg(p + 64 + lane),
             e = __ldcg(p + 96 + lane);
        if (write) {
            int4* q = dst + (c % chunks) * 128;
            __stcg(q + lane, a); __stcg(q + 32 + lane, b); __stcg(q + 64 + lane, d);
            __stcg(q + 96 + lane, e);
        }
        acc.x ^= a.x ^ b.x ^ d.x ^ e.x;
        c += warps; ++it;
        t = gtime();
    }
    if (acc.x == 0x7fffffff) { sink[0] = acc; pad[0] = acc; }
    if (lane == 0) {
        atomicAdd(bytes, it * 2048ULL * (write ? 2ULL : 1ULL));
        atomicMin(span, t0);
        atomicMax(span + 1, t);
    }
}

extern "C" __global__ void chase(const unsigned* __restrict__ next, unsigned start, int steps,
        unsigned long long delay_ns, unsigned long long* out, unsigned* sink) {
    const unsigned long long w0 = gtime();
    while (gtime() - w0 < delay_ns) { }
    unsigned idx = start;
    idx = __ldcg(next + idx);                       // warm the first line's page
    const unsigned long long t0 = gtime();
    const long long c0 = clock64();
    for (int i = 0; i < steps; ++i) idx = __ldcg(next + idx);
    const long long c1 = clock64();
    const unsigned long long t1 = gtime();
    out[0] = t1 - t0; out[1] = (unsigned long long)(c1 - c0);
    sink[0] = idx;
}

extern "C" __global__ void trip(const int4* __restrict__ buf, unsigned start, int steps,
        unsigned long long delay_ns, unsigned long long* out, int4* sink) {
    const int lane = threadIdx.x & 31;
    const unsigned long long w0 = gtime();
    while (gtime() - w0 < delay_ns) { }
    unsigned chunk = start;
    int4 acc = make_int4(0, 0, 0, 0);
    const unsigned long long t0 = gtime();
    const long long c0 = clock64();
    for (int i = 0; i < steps; ++i) {
        const int4* p = buf + (unsigned long long)chunk * 128;
        int4 a = __ldcg(p + lane), b = __ldcg(p + 32 + lane), d = __ldcg(p + 64 + lane),
             e = __ldcg(p + 96 + lane);
        acc.y ^= b.y ^ d.y ^ e.y;
        chunk = (unsigned)__shfl_sync(0xffffffffu, a.x, 0);
    }
    const long long c1 = clock64();
    const unsigned long long t1 = gtime();
    if (lane == 0) { out[0] = t1 - t0; out[1] = (unsigned long long)(c1 - c0); }
    if (acc.y == 0x7fffffff) sink[0] = acc;
    if (lane == 0) sink[1].x = chunk;
}
"""

GIB = 1 << 30
LINE = 128
CHUNK = 2048


def permutation_chain(cp, n_items: int, stride_words: int, seed: int):
    """A random cycle over n_items slots, stride_words apart: slot i's first word holds the
    word index of the next slot (uint32)."""
    rs = cp.random.RandomState(seed)
    order = rs.permutation(n_items).astype(cp.uint64)
    nxt = cp.roll(order, -1)
    return order, nxt * stride_words


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--duration-ms", type=float, default=25.0)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    import cupy as cp

    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    sms = props["multiProcessorCount"]
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    smem_optin = props.get("sharedMemPerBlockOptin", 232448)
    mod = cp.RawModule(code=SRC, options=("-std=c++17", "-arch=sm_90"))
    k_bg, k_chase, k_trip = (mod.get_function(n) for n in ("background", "chase", "trip"))
    k_bg.max_dynamic_shared_size_bytes = smem_optin

    src = cp.zeros(4 * GIB // 16 * 4, dtype=cp.int32).view(cp.int32)   # 4 GiB
    dst = cp.zeros_like(src)
    chunks = src.size * 4 // CHUNK

    # chase tables: a cycle of 128-B lines over 256 MiB and over 4 GiB (uint32 word indices)
    region_small = 256 * (1 << 20) // LINE
    region_large = (4 * GIB - LINE) // LINE
    chase_buf = cp.zeros(4 * GIB // 4, dtype=cp.uint32)
    tables = {}
    for label, n in (("256MiB", region_small), ("4GiB", region_large)):
        buf = chase_buf if label == "4GiB" else cp.zeros(256 * (1 << 20) // 4, dtype=cp.uint32)
        order, nxt = permutation_chain(cp, n, LINE // 4, 1 if label == "4GiB" else 2)
        buf[order * (LINE // 4)] = nxt.astype(cp.uint32)
        tables[label] = (buf, int(order[0]) * (LINE // 4))
        del order, nxt
    # trip table: the first word of each 2-KB chunk of a 4-GiB region names the next chunk
    trip_buf = cp.zeros(4 * GIB // 4, dtype=cp.int32)
    n_trip = trip_buf.size * 4 // CHUNK
    order, nxt = permutation_chain(cp, n_trip, 1, 3)
    trip_buf[order * (CHUNK // 4)] = nxt.astype(cp.int32)
    trip_start = int(order[0])
    del order, nxt
    cp.cuda.Device().synchronize()

    s_bg = cp.cuda.Stream(non_blocking=True)
    s_probe = cp.cuda.Stream(non_blocking=True)
    out = cp.zeros(2, dtype=cp.uint64)
    sink = cp.zeros(64, dtype=cp.int32)
    bytes_done = cp.zeros(1, dtype=cp.uint64)
    span = cp.zeros(2, dtype=cp.uint64)
    delay_ns = np.uint64(3_000_000)

    def probe(kind: str, steps: int):
        if kind == "trip":
            k_trip((1,), (32,), (trip_buf, np.uint32(trip_start), np.int32(steps), delay_ns,
                                 out, sink), stream=s_probe)
        else:
            buf, start = tables[kind]
            k_chase((1,), (1,), (buf, np.uint32(start), np.int32(steps), delay_ns, out, sink),
                    stream=s_probe)

    probes = (("256MiB", 3000), ("4GiB", 3000), ("trip", 2000))
    configs = [(0, 0)] + [(w, wr) for wr in (0, 1) for w in (1, 2, 3, 4, 6, 8, 12, 16, 32)]
    rows = []
    t_start = time.time()
    for w, wr in configs:
        for kind, steps in probes:
            for rep in range(a.repeats):
                bytes_done.fill(0)
                span[0] = np.uint64(2 ** 64 - 1)
                span[1] = 0
                cp.cuda.Device().synchronize()
                if w:
                    k_bg((sms - 1,), (32 * w,), (src.view(cp.int32), dst, np.uint64(chunks),
                                            np.uint64(int(a.duration_ms * 1e6)), np.int32(wr),
                                            bytes_done, span, sink),
                         shared_mem=smem_optin - 1024, stream=s_bg)
                probe(kind, steps)
                cp.cuda.Device().synchronize()
                ns, cyc = (int(x) for x in cp.asnumpy(out))
                b = int(cp.asnumpy(bytes_done)[0])
                sp = cp.asnumpy(span)
                span_ns = int(sp[1]) - int(sp[0]) if w else 0
                row = {"bg_warps_per_sm": w, "bg_write": wr, "probe": kind, "steps": steps,
                       "repeat": rep, "probe_ns": ns, "probe_cycles": cyc,
                       "ns_per_step": ns / steps, "cycles_per_step": cyc / steps,
                       "bg_bytes": b, "bg_span_ns": span_ns,
                       "bg_bytes_per_s": b / span_ns * 1e9 if span_ns > 0 else 0.0}
                rows.append(row)
                print(f"w={w:2d} write={wr} {kind:>6}: {ns / steps:8.1f} ns/step "
                      f"{cyc / steps:8.1f} cyc/step  bg {row['bg_bytes_per_s'] / 1e12:5.2f} TB/s",
                      flush=True)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.mem,power.draw",
                          "--format=csv"], capture_output=True, text=True).stdout
    with open(a.output, "w") as f:
        json.dump({"device": name, "sm_count": sms, "nvidia_smi": smi, "rows": rows,
                   "seconds": time.time() - t_start}, f, indent=1)
    # summary: medians per (config, probe)
    print("\nbg_warps write | TB/s | chase 256MiB ns | chase 4GiB ns | trip ns")
    for w, wr in configs:
        sel = [r for r in rows if r["bg_warps_per_sm"] == w and r["bg_write"] == wr]
        med = {k: float(np.median([r["ns_per_step"] for r in sel if r["probe"] == k]))
               for k, _ in probes}
        tb = float(np.median([r["bg_bytes_per_s"] for r in sel])) / 1e12
        print(f"{w:8d} {wr:5d} | {tb:4.2f} | {med['256MiB']:15.1f} | {med['4GiB']:13.1f} | "
              f"{med['trip']:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
