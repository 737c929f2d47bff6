"""Does a DRAM-bound kernel leave DRAM work behind for the next one? (fast vs exact mode:
exact mode's FIFO DRAM server carries a kernel's last write-backs into the next kernel, 3.9 µs
at the end of a standard attention softmax on the H100 config, docs/fast_mode_accuracy.md.)

Kernel A copies a buffer (16-byte loads and stores, grid-stride; X bytes read and X written,
X ≫ L2); kernel B reads another buffer (Y bytes, a sum reduction per thread). B is timed with
CUDA events recorded between A and B and after B:
  cold:  B after a read-only kernel of the same size as A (no dirty line, nothing queued)
  b2b:   B right after A in the same stream (A's queued write-backs, and its dirty lines)
  b2b_write: B right after a write-only kernel of X bytes
  gap:   A, a host sync and a 2 ms sleep, then B (A's dirty lines only, if the L2 keeps them)
  spin:  A, then a 1-CTA kernel spinning 2 ms on %globaltimer, then B (same, in one stream)
and A's own time (its bytes over time: is the last of its write-backs inside it?). Medians
of 15 after 3 warm-ups; Y 64, 256 and 1024 MiB; X 1 GiB. None is a validation shape.

    python3 scripts/experiments/dram_carryover_h200.py OUT.json
    ncu --clock-control none --cache-control none --csv --metrics \
        gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
        python3 scripts/experiments/dram_carryover_h200.py --ncu > OUT_ncu.csv
"""
from __future__ import annotations

import json
import statistics
import sys
import time

SRC = r"""
extern "C" __global__ void copy16(const int4* __restrict__ src, int4* __restrict__ dst, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}
extern "C" __global__ void write16(int4* __restrict__ dst, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        dst[i] = make_int4((int)i, 1, 2, 3);
}
extern "C" __global__ void read16(const int4* __restrict__ src, long long n, int* __restrict__ sink) {
    int acc = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        int4 v = src[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678) sink[0] = acc;
}
extern "C" __global__ void spin(long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < (unsigned long long)ns);
}
"""


def main(out_path: str) -> None:
    import cupy as cp
    mod = cp.RawModule(code=SRC, options=("-std=c++17",))
    copy16, read16, spin, write16 = (mod.get_function(n)
                                     for n in ("copy16", "read16", "spin", "write16"))
    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    grid, block = (sms * 8,), (256,)
    x = 1 << 30
    a_src = cp.ones(x // 4, dtype=cp.int32)
    a_dst = cp.zeros(x // 4, dtype=cp.int32)
    sink = cp.zeros(1, dtype=cp.int32)
    nx = cp.int64(x // 16)

    def run_a():
        copy16(grid, block, (a_src, a_dst, nx))

    def run_r():
        read16(grid, block, (a_src, nx, sink))

    def run_w():
        write16(grid, block, (a_dst, nx))

    out = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "x_bytes": x,
           "rows": []}
    for y_mib in (64, 256, 1024):
        y = y_mib << 20
        b_src = cp.ones(y // 4, dtype=cp.int32)
        ny = cp.int64(y // 16)
        e0, e1, e2 = cp.cuda.Event(), cp.cuda.Event(), cp.cuda.Event()

        def timed_b(before, host_gap_s=0.0):
            before()
            if host_gap_s:
                cp.cuda.Device().synchronize()
                time.sleep(host_gap_s)
            e0.record()
            read16(grid, block, (b_src, ny, sink))
            e1.record()
            e1.synchronize()
            return cp.cuda.get_elapsed_time(e0, e1) * 1e3

        cases = {
            "cold": lambda: timed_b(run_r),
            "b2b": lambda: timed_b(run_a),
            "b2b_write": lambda: timed_b(run_w),
            "gap": lambda: timed_b(run_a, 2e-3),
            "spin": lambda: timed_b(lambda: (run_a(), spin((1,), (32,), (cp.int64(2_000_000),)))),
        }
        row = {"y_bytes": y}
        for name, fn in cases.items():
            for _ in range(3):
                fn()
            row[name + "_us"] = statistics.median(fn() for _ in range(15))
        # A alone: its time and effective rate (2 X bytes moved)
        times = []
        for i in range(18):
            run_r()
            e0.record()
            run_a()
            e2.record()
            e2.synchronize()
            if i >= 3:
                times.append(cp.cuda.get_elapsed_time(e0, e2) * 1e3)
        row["a_us"] = statistics.median(times)
        row["a_tb_per_s"] = 2 * x / (row["a_us"] * 1e-6) / 1e12
        row["b_cold_tb_per_s"] = y / (row["cold_us"] * 1e-6) / 1e12
        out["rows"].append(row)
        print(json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()}),
              flush=True)
        del b_src
    with open(out_path, "w") as f:
        json.dump(out, f, indent=1)


def ncu_sequence() -> None:
    """For Nsight Compute (--cache-control none): A, then B of 256 MiB, once each after one
    read-only kernel; ncu's own gap between kernels makes this the `gap` case, and B's DRAM
    writes are A's dirty lines that the L2 kept until B evicted them."""
    import cupy as cp
    mod = cp.RawModule(code=SRC, options=("-std=c++17",))
    copy16, read16 = mod.get_function("copy16"), mod.get_function("read16")
    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    grid, block = (sms * 8,), (256,)
    x, y = 1 << 30, 256 << 20
    a_src, a_dst = cp.ones(x // 4, dtype=cp.int32), cp.zeros(x // 4, dtype=cp.int32)
    b_src, sink = cp.ones(y // 4, dtype=cp.int32), cp.zeros(1, dtype=cp.int32)
    read16(grid, block, (a_src, cp.int64(x // 16), sink))
    copy16(grid, block, (a_src, a_dst, cp.int64(x // 16)))
    read16(grid, block, (b_src, cp.int64(y // 16), sink))
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    if sys.argv[1] == "--ncu":
        ncu_sequence()
    else:
        main(sys.argv[1])
