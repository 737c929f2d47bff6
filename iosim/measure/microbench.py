"""Calibration microbenchmarks (GPU only; imports cupy and nothing of the core).

Each function returns a figure and says how it was measured. Run on the GPU machine as
`python3 -m iosim.measure.microbench -o calibration.json`; `iosim calibrate --from-json`
turns the JSON into iosim/data/gpus/<gpu>-calibrated.yaml on any machine.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

_SRC = r"""
extern "C" __global__ void l2_read(const float4* __restrict__ buf, long long n_vec,
                                   int reps, float* __restrict__ sink) {
    // every CTA sweeps a rotating window of the buffer with 16-byte L2-only loads (ld.global.cg)
    float acc = 0.f;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (int r = 0; r < reps; ++r) {
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += stride) {
            float4 v = __ldcg(buf + i);
            acc += v.x + v.y + v.z + v.w;
        }
    }
    if (acc == 1234.5f) sink[0] = acc;   // keeps the loads alive
}

extern "C" __global__ void exp_rate(float* __restrict__ out, int iters,
                                    long long* __restrict__ cycles) {
    // 8 independent chains of ex2.approx per thread; clock64 measures SM cycles
    float x0 = threadIdx.x * 1e-7f, x1 = x0 + 1e-3f, x2 = x0 + 2e-3f, x3 = x0 + 3e-3f;
    float x4 = x0 + 4e-3f, x5 = x0 + 5e-3f, x6 = x0 + 6e-3f, x7 = x0 + 7e-3f;
    __syncthreads();
    long long t0 = clock64();
    for (int i = 0; i < iters; ++i) {
        asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x0)); asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x1));
        asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x2)); asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x3));
        asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x4)); asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x5));
        asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x6)); asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x7));
    }
    __syncthreads();
    long long t1 = clock64();
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
    out[blockIdx.x * blockDim.x + threadIdx.x] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}

extern "C" __global__ void mma_sync_rate(float* __restrict__ out, int iters) {
    // warp-level mma.sync.m16n8k16 (fp16 in, fp32 accumulate) on 8 independent accumulators
    unsigned a0 = 0x3c003c00u ^ threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3;
    unsigned b0 = 0x3c003c00u ^ (threadIdx.x << 1), b1 = b0 + 1;
    float c[8][4];
    #pragma unroll
    for (int k = 0; k < 8; ++k) { c[k][0] = c[k][1] = c[k][2] = c[k][3] = 0.f; }
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int k = 0; k < 8; ++k) {
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        }
    }
    float acc = 0.f;
    #pragma unroll
    for (int k = 0; k < 8; ++k) acc += c[k][0] + c[k][1] + c[k][2] + c[k][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

extern "C" __global__ void empty_kernel() {}
"""


# fp32 atomic reduction into L2, the access pattern of FA-2's dQaccum (fa2_bwd.cu)
_ATOMIC_SRC = r"""
extern "C" __global__ void red_tile(float* __restrict__ buf, int tile_floats, int share, int n_tiles,
                                    int reps, int layout, int op) {
    // CTA c adds (op 1, 2: red.global.add.f32 scalar / .v4) or stores (op 0) one fp32 tile of
    // tile_floats per rep into tile ((c / share) + r) % n_tiles: the `share` CTAs of a group
    // hit the same tile at the same time, different groups different tiles. layout 0: a warp
    // covers 128 contiguous bytes per instruction; layout 1: the mma.sync accumulator fragment
    // of FA-2's dQ (8 rows x 4 lanes x 2 adjacent floats, 16 warp-rows, d = 128 columns)
    const int group = blockIdx.x / share;
    const float v = 1.0f;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
    for (int r = 0; r < reps; ++r) {
        float* tile = buf + (long long)((group + r) % n_tiles) * tile_floats;
        if (layout == 0) {
            if (op == 2) {
                for (int e = threadIdx.x * 4; e < tile_floats; e += blockDim.x * 4)
                    asm volatile("red.global.add.v4.f32 [%0], {%1, %1, %1, %1};"
                                 :: "l"(tile + e), "f"(v) : "memory");
            } else {
                for (int e = threadIdx.x; e < tile_floats; e += blockDim.x) {
                    if (op == 1) asm volatile("red.global.add.f32 [%0], %1;" :: "l"(tile + e), "f"(v) : "memory");
                    else asm volatile("st.global.f32 [%0], %1;" :: "l"(tile + e), "f"(v) : "memory");
                }
            }
        } else {
            const int rows = tile_floats / 128;
            for (int r16 = warp * 16; r16 < rows; r16 += nwarp * 16)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    float* dst = tile + (long long)(r16 + (lane >> 2) + hf * 8) * 128 + (lane & 3) * 2;
#pragma unroll
                    for (int n = 0; n < 16; ++n) {
                        if (op == 1) {
                            asm volatile("red.global.add.f32 [%0], %1;" :: "l"(dst + n * 8), "f"(v) : "memory");
                            asm volatile("red.global.add.f32 [%0], %1;" :: "l"(dst + n * 8 + 1), "f"(v) : "memory");
                        } else {
                            asm volatile("st.global.f32 [%0], %1;" :: "l"(dst + n * 8), "f"(v) : "memory");
                            asm volatile("st.global.f32 [%0], %1;" :: "l"(dst + n * 8 + 1), "f"(v) : "memory");
                        }
                    }
                }
        }
    }
}
"""


def _time_ms(fn, warmup=3, reps=20):
    import cupy as cp
    for _ in range(warmup):
        fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def device_facts() -> dict:
    import cupy as cp
    props = cp.cuda.runtime.getDeviceProperties(0)
    return {"name": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
            "sm_count": props["multiProcessorCount"], "l2_capacity_bytes": props["l2CacheSize"],
            "clock_hz_reported": props["clockRate"] * 1e3,
            "shared_memory_per_sm_bytes": props["sharedMemPerMultiprocessor"],
            "shared_memory_per_block_bytes": props["sharedMemPerBlockOptin"],
            "dram_capacity_bytes": props["totalGlobalMem"]}


def dram_bandwidth(size_bytes: int = 4 << 30) -> dict:
    import cupy as cp
    n = size_bytes // 4
    src = cp.random.random(n, dtype=cp.float32)
    dst = cp.empty_like(src)
    ms = _time_ms(lambda: cp.copyto(dst, src))
    return {"dram_bandwidth_bytes_per_s": 2 * size_bytes / (ms * 1e-3),
            "method": f"device-to-device copy of {size_bytes / 2**30:.0f} GiB, bytes read + written, "
                      f"median of 20 CUDA-event timings"}


def l2_bandwidth(mod, sm_count: int, window_bytes: int = 16 << 20, reps: int = 50) -> dict:
    import cupy as cp
    n_vec = window_bytes // 16
    buf = cp.random.random(window_bytes // 4, dtype=cp.float32)
    sink = cp.zeros(1, dtype=cp.float32)
    k = mod.get_function("l2_read")
    grid, block = sm_count * 4, 512
    ms = _time_ms(lambda: k((grid,), (block,), (buf, cp.int64(n_vec), cp.int32(reps), sink)))
    return {"l2_bandwidth_bytes_per_s": window_bytes * reps / (ms * 1e-3),
            "method": f"{window_bytes >> 20} MiB buffer (fits L2) read {reps}x with 16-byte ld.global.cg "
                      f"by {grid} CTAs x {block} threads, median of 20"}


def tensor_rate(dtype: str = "fp16", n: int = 8192) -> dict:
    import cupy as cp
    dt = {"fp16": cp.float16}[dtype]   # cupy has no bf16 dtype; bf16 runs at the fp16 rate
    a = cp.random.standard_normal((n, n), dtype=cp.float32).astype(dt)
    b = cp.random.standard_normal((n, n), dtype=cp.float32).astype(dt)
    ms = _time_ms(lambda: cp.matmul(a, b), reps=10)
    return {"tensor_flops_per_s": 2 * n ** 3 / (ms * 1e-3),
            "method": f"cupy.matmul (cuBLAS) {n}^3 {dtype} on random normal data, median of 10"}


def exp_throughput(mod, sm_count: int, clock_hz: float, iters: int = 8192) -> dict:
    import cupy as cp
    k = mod.get_function("exp_rate")
    grid, block = sm_count, 1024          # one 1024-thread CTA per SM, alone on its SM
    out = cp.empty(grid * block, dtype=cp.float32)
    cycles = cp.zeros(grid, dtype=cp.int64)
    ms = _time_ms(lambda: k((grid,), (block,), (out, cp.int32(iters), cycles)), reps=10)
    exps_per_cta = block * iters * 8
    per_cta_cycles = float(cp.median(cycles.astype(cp.float64)))
    by_events = exps_per_cta * grid / (ms * 1e-3) / sm_count / clock_hz
    return {"exp_per_clock_per_sm": exps_per_cta / per_cta_cycles,
            "exp_per_clock_per_sm_by_events": by_events,
            "method": f"ex2.approx.ftz.f32, 8 independent chains per thread, one {block}-thread CTA "
                      f"per SM, clock64 cycles inside the CTA (cross-check: CUDA-event time at the "
                      f"reported {clock_hz / 1e6:.0f} MHz clock)"}


def mma_sync_rate(mod, sm_count: int, iters: int = 4096) -> dict:
    import cupy as cp
    k = mod.get_function("mma_sync_rate")
    grid, block = sm_count * 4, 256          # 32 warps per SM
    out = cp.empty(grid * block, dtype=cp.float32)
    ms = _time_ms(lambda: k((grid,), (block,), (out, cp.int32(iters))), reps=10)
    flops = grid * (block // 32) * iters * 8 * 2 * 16 * 8 * 16
    return {"tensor_flops_per_s": flops / (ms * 1e-3),
            "method": f"mma.sync.aligned.m16n8k16 f16->f32 from registers, 8 independent "
                      f"accumulators per warp, {grid} CTAs x {block // 32} warps, median of 10"}


def launch_overhead(mod, n: int = 2000) -> dict:
    k = mod.get_function("empty_kernel")
    ms = _time_ms(lambda: [k((1,), (32,), ()) for _ in range(n)], warmup=1, reps=5)
    return {"launch_overhead_s": ms * 1e-3 / n,
            "method": f"{n} back-to-back empty launches timed with CUDA events, per launch"}


ATOMIC_TILE_ROWS, ATOMIC_TILE_COLS = 128, 128     # one Br x d fp32 dQ tile (64 KiB)
ATOMIC_SHARES = (1, 4, 16, 64, 264)


def atomic_reduction(sm_count: int, ctas_per_sm: int = 2, threads: int = 256,
                     target_ms: float = 2.0) -> dict:
    """fp32 reduction throughput into L2: every CTA adds a 128 x 128 fp32 tile per rep, groups
    of `share` CTAs into the same tile at the same time (share 1: distinct addresses), in the
    layout of the dQ accumulator fragment (what fa2_bwd.cu's atomicAdd issues) and in a
    coalesced layout, against plain stores of the same pattern. Bytes are 4 per added float."""
    import cupy as cp
    mod = cp.RawModule(code=_ATOMIC_SRC, options=("-std=c++17",))
    k = mod.get_function("red_tile")
    grid = sm_count * ctas_per_sm
    tile = ATOMIC_TILE_ROWS * ATOMIC_TILE_COLS
    rows = []
    variants = [("fragment", 1, "red.f32"), ("fragment", 0, "st.f32"),
                ("coalesced", 1, "red.f32"), ("coalesced", 2, "red.v4.f32"),
                ("coalesced", 0, "st.f32")]
    layouts = {"fragment": 1, "coalesced": 0}
    for share in ATOMIC_SHARES:
        share = min(share, grid)
        n_groups = -(-grid // share)
        for layout, op, name in variants:
            buf = cp.zeros(n_groups * tile, dtype=cp.float32)

            def launch(reps):
                k((grid,), (threads,), (buf, cp.int32(tile), cp.int32(share),
                                        cp.int32(n_groups), cp.int32(reps),
                                        cp.int32(layouts[layout]), cp.int32(op)))
            probe_ms = _time_ms(lambda: launch(4), warmup=1, reps=3)
            reps = max(4, min(4096, int(4 * target_ms / max(probe_ms, 1e-3))))
            reps -= reps % n_groups if reps >= n_groups else 0
            buf.fill(0)
            launch(reps)
            total = float(buf.sum(dtype=cp.float64))
            expect = float(grid) * reps * tile if op else float(n_groups * tile)
            ok = total == expect if op else bool(cp.all(buf == 1.0))
            ms = _time_ms(lambda: launch(reps), warmup=2, reps=10)
            nbytes = grid * reps * tile * 4
            rows.append({"layout": layout, "op": name, "share": share, "ctas": grid,
                         "reps": reps, "ms": ms, "bytes_per_s": nbytes / (ms * 1e-3),
                         "checked": ok})
    return {"rows": rows,
            "method": f"{grid} CTAs x {threads} threads, each adds (red.global.add.f32) or stores "
                      f"one {ATOMIC_TILE_ROWS}x{ATOMIC_TILE_COLS} fp32 tile per rep; `share` CTAs "
                      f"target the same tile at once; bytes = 4 per float; median of 10 CUDA-event "
                      f"timings; checked: sum of the buffer (float64) equals the adds made"}


def atomic_table(result: dict) -> str:
    lines = [f"{'layout':10} {'op':11} {'share':>5} {'reps':>5} {'ms':>8} {'GB/s':>9} ok"]
    for r in result["rows"]:
        lines.append(f"{r['layout']:10} {r['op']:11} {r['share']:5d} {r['reps']:5d} "
                     f"{r['ms']:8.3f} {r['bytes_per_s'] / 1e9:9.1f} {r['checked']}")
    return "\n".join(lines)


def run_all() -> dict:
    import cupy as cp
    facts = device_facts()
    mod = cp.RawModule(code=_SRC, options=("--use_fast_math",))
    results = {"device": facts, "measured_on": time.strftime("%Y-%m-%d", time.gmtime())}
    results["dram"] = dram_bandwidth()
    results["l2"] = l2_bandwidth(mod, facts["sm_count"])
    results["tensor_fp16"] = tensor_rate("fp16")
    results["exp"] = exp_throughput(mod, facts["sm_count"], facts["clock_hz_reported"])
    results["launch"] = launch_overhead(mod)
    results["tensor_fp16_mma_sync"] = mma_sync_rate(mod, facts["sm_count"])
    results["atomic_reduction"] = atomic_reduction(facts["sm_count"])
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--only-atomics", action="store_true",
                    help="run only the fp32 atomic reduction benchmark")
    args = ap.parse_args(argv)
    if args.only_atomics:
        facts = device_facts()
        results = {"device": facts, "measured_on": time.strftime("%Y-%m-%d", time.gmtime()),
                   "atomic_reduction": atomic_reduction(facts["sm_count"])}
        with open(args.output, "w") as f:
            json.dump(results, f, indent=2, sort_keys=True)
        print(atomic_table(results["atomic_reduction"]))
        return
    with open(args.output, "w") as f:
        json.dump(results, f, indent=2, sort_keys=True)
    print(json.dumps(results, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
