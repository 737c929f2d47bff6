"""DRAM stream rates by direction (GPU only; imports cupy and nothing of the core).

A copy (`iosim calibrate`'s DRAM figure) moves as many bytes each way. Kernels do not: decode
reads its KV cache and writes almost nothing, standard attention writes S and P. HBM turns
the bus around between reads and writes, so a read-only stream runs faster than a copy.
This microbenchmark measures streams of every read share with one kernel: each thread reads
`read` and writes `write` 16-byte vectors per step from two buffers far larger than L2
(streaming loads and stores, ld.global.cs / st.global.cs), on every SM.

`checks` in the JSON: each mixed row's time against R / read_rate + W / write_rate (the
read-only and write-only rows): the mixed rows run 7-14% slower, the cost of turning the bus
around. The simulator takes all five rows (`iosim calibrate --dram-stream` writes them into
the GPU config): `machine.dram_byte_cost` interpolates a byte's DRAM time between them by the
read share of the bytes in flight.

Run on the GPU machine: `python3 -m iosim.measure.dram_stream -o dram_stream_h200.json`
(the committed runs: `python3 iosim/measure/dram_stream.py`, before its timer moved to
microbench's).
"""
from __future__ import annotations

import argparse
import json
import time

from .microbench import _time_ms

_SRC = r"""
extern "C" __global__ void stream_rw(const float4* __restrict__ src, float4* __restrict__ dst,
                                     long long n_vec, int reads, int writes,
                                     float* __restrict__ sink) {
    // step i: `reads` streaming loads from src and `writes` streaming stores to dst, the r-th
    // of them in the r-th region of n_vec vectors, so every warp instruction covers 512
    // consecutive bytes (whole 32-byte sectors: no partial-sector writes); grid-stride
    float acc = 0.f;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += stride) {
        #pragma unroll 4
        for (int r = 0; r < reads; ++r) {
            float4 v = __ldcs(src + r * n_vec + i);
            acc += v.x + v.y + v.z + v.w;
        }
        #pragma unroll 4
        for (int w = 0; w < writes; ++w) {
            __stcs(dst + w * n_vec + i, make_float4(acc, (float)w, 0.f, 1.f));
        }
    }
    if (acc == 1234.5f) sink[0] = acc;   // keeps the loads alive when nothing is written
}
"""

# (reads, writes) 16-byte vectors per step: read-only, 3:1, copy, 1:3, write-only
MIXES = ((4, 0), (3, 1), (2, 2), (1, 3), (0, 4))


def measure(total_bytes: int = 4 << 30) -> dict:
    """Every mix of MIXES moving `total_bytes` (reads + writes) once per timing."""
    import cupy as cp
    props = cp.cuda.runtime.getDeviceProperties(0)
    sm_count = props["multiProcessorCount"]
    mod = cp.RawModule(code=_SRC)
    k = mod.get_function("stream_rw")
    src = cp.random.random(total_bytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    sink = cp.zeros(1, dtype=cp.float32)
    grid, block = sm_count * 8, 512
    rows = []
    for reads, writes in MIXES:
        n_vec = total_bytes // 16 // (reads + writes)
        ms = _time_ms(lambda: k((grid,), (block,), (src, dst, cp.int64(n_vec), cp.int32(reads),
                                                     cp.int32(writes), sink)), reps=10)
        rb, wb = n_vec * reads * 16, n_vec * writes * 16
        rows.append({"read_bytes": rb, "write_bytes": wb, "ms": ms,
                     "bytes_per_s": (rb + wb) / (ms * 1e-3)})
    copyto_ms = _time_ms(lambda: cp.copyto(dst, src), reps=10)   # iosim calibrate's DRAM figure
    read_rate = rows[0]["bytes_per_s"]
    write_rate = rows[-1]["bytes_per_s"]
    checks = []
    for r in rows[1:-1]:
        predicted_s = r["read_bytes"] / read_rate + r["write_bytes"] / write_rate
        checks.append({"read_share": r["read_bytes"] / (r["read_bytes"] + r["write_bytes"]),
                       "measured_s": r["ms"] * 1e-3, "predicted_s": predicted_s,
                       "error": predicted_s / (r["ms"] * 1e-3) - 1})
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    return {"device": name, "measured_on": time.strftime("%Y-%m-%d", time.gmtime()),
            "dram_read_bandwidth_bytes_per_s": read_rate,
            "dram_write_bandwidth_bytes_per_s": write_rate,
            "copy_bandwidth_bytes_per_s": rows[2]["bytes_per_s"],
            "cupy_copyto_bandwidth_bytes_per_s": 2 * src.nbytes / (copyto_ms * 1e-3),
            "rows": rows, "checks": checks,
            "method": f"stream_rw: {grid} CTAs x {block} threads, 16-byte ld.global.cs / "
                      f"st.global.cs, {total_bytes / 2**30:.0f} GiB moved per timing (reads + "
                      f"writes) from two {total_bytes / 2**30:.0f} GiB buffers, median of 10 "
                      f"CUDA-event timings; reads:writes per step {MIXES}"}


def table(result: dict) -> str:
    lines = [f"{'read share':>10} {'ms':>8} {'GB/s':>8}"]
    for r in result["rows"]:
        share = r["read_bytes"] / (r["read_bytes"] + r["write_bytes"])
        lines.append(f"{share:10.2f} {r['ms']:8.3f} {r['bytes_per_s'] / 1e9:8.1f}")
    lines.append(f"cupy.copyto (iosim calibrate's figure): "
                 f"{result['cupy_copyto_bandwidth_bytes_per_s'] / 1e9:.1f} GB/s")
    for c in result["checks"]:
        lines.append(f"model R/read + W/write at read share {c['read_share']:.2f}: "
                     f"{c['error']:+.1%} vs measured")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    result = measure()
    with open(args.output, "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
    print(table(result))


if __name__ == "__main__":
    main()
