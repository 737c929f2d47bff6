"""How long the H200's L2 keeps lines dirty while clean data streams past them (issue 12's DRAM
budget: attention stores O, dK, dV while K/V stream). One kernel per configuration, 528 CTAs ×
512 threads (4 per SM, all resident at once), 16-byte ld.global.cg / st.global.cg (L1 bypassed),
under Nsight Compute's default cache control (L2 flushed and invalidated before each kernel; dirty
lines left at a kernel's end counted by no kernel), so DRAM write bytes = the dirty bytes the L2
wrote back during the kernel. Each CTA owns 1/528 of buffer A (written) and of buffer B (read,
never written, distinct from A):

  then    CTA writes its chunk of A (W bytes in all), then reads its chunk of B (S bytes): the
          dirty lines' survival as clean lines stream past them after the writes
  inter   the same bytes interleaved, 64 rounds per CTA of (read S/64/528 of B, write W/64/528
          of A): stores amid a clean stream, as an attention kernel's O stores amid its K/V
          loads

    python3 scripts/experiments/l2_dirty_probe_h200.py OUT.csv      (runs ncu over itself)
"""
from __future__ import annotations

import csv
import os
import subprocess
import sys

SRC = r"""
extern "C" __global__ void l2dirty(int4* a, long long na, const int4* b, long long nb, int mode,
                                   int* out) {
    int acc = 0;
    const long long g = gridDim.x, c = blockIdx.x;
    const long long pa = (na + g - 1) / g, pb = (nb + g - 1) / g;
    const long long a0 = c * pa, a1 = min(na, a0 + pa), b0 = c * pb, b1 = min(nb, b0 + pb);
    const int rounds = mode == 0 ? 1 : 64;
    const long long ra = (pa + rounds - 1) / rounds, rb = (pb + rounds - 1) / rounds;
    for (int r = 0; r < rounds; ++r) {
        const long long x0 = mode == 0 ? a0 : min(a1, a0 + r * ra), x1 = mode == 0 ? a1 : min(a1, x0 + ra);
        const long long y0 = mode == 0 ? b0 : min(b1, b0 + r * rb), y1 = mode == 0 ? b1 : min(b1, y0 + rb);
        if (mode == 0) {
            for (long long i = x0 + threadIdx.x; i < x1; i += blockDim.x) __stcg(a + i, make_int4((int)i, 1, 2, 3));
            __syncthreads();
            for (long long i = y0 + threadIdx.x; i < y1; i += blockDim.x) { int4 v = __ldcg(b + i); acc ^= v.x ^ v.w; }
        } else {
            for (long long i = y0 + threadIdx.x; i < y1; i += blockDim.x) { int4 v = __ldcg(b + i); acc ^= v.x ^ v.w; }
            for (long long i = x0 + threadIdx.x; i < x1; i += blockDim.x) __stcg(a + i, make_int4((int)i, r, 2, 3));
        }
    }
    if (acc == 0x7f3a2b1c) out[0] = acc;
}
"""
# (mode, W MiB, S MiB)
CONFIGS = ([("then", w, s) for w in (8, 16, 24) for s in (0, 8, 16, 24, 32, 48, 64)]
           + [("inter", w, s) for w in (8, 16, 32, 64) for s in (0, w // 2, w, 2 * w, 4 * w)]
           + [("then", w, 0) for w in (32, 48, 64)])
METRICS = "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum"
MIB = 1 << 20


def target() -> None:
    import cupy as cp
    k = cp.RawModule(code=SRC).get_function("l2dirty")
    out = cp.zeros(1, dtype=cp.int32)
    a = cp.zeros(64 * MIB // 4, dtype=cp.int32)
    b = cp.random.randint(0, 1 << 30, size=256 * MIB // 4, dtype=cp.int32)
    for mode, w, s in CONFIGS:
        k((528,), (512,), (a, cp.int64(w * MIB // 16), b, cp.int64(max(s, 0) * MIB // 16),
                           cp.int32(0 if mode == "then" else 1), out))
        cp.cuda.runtime.deviceSynchronize()


def main(out_csv: str) -> None:
    sys.path.insert(0, os.getcwd())
    from iosim.measure.ncu import parse_csv
    cmd = ["ncu", "--clock-control", "none", "--metrics", METRICS, "--csv", "--page", "raw",
           "--print-units", "base", "-k", "regex:l2dirty", "python3", __file__, "--target"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    rows = parse_csv(res.stdout)
    if len(rows) != len(CONFIGS):
        print(res.stdout[-3000:], res.stderr[-3000:])
        raise SystemExit(f"expected {len(CONFIGS)} kernels, got {len(rows)}")
    with open(out_csv, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["mode", "written_bytes", "streamed_bytes", "dram_read_bytes",
                     "dram_write_bytes", "ncu_time_s"])
        for (mode, w, s), r in zip(CONFIGS, rows):
            wr.writerow([mode, w * MIB, s * MIB, r["dram_read_bytes"], r["dram_write_bytes"],
                         r["ncu_time_s"]])
            print(f"{mode:5s} W {w:3d} S {s:4d} MiB  read {r['dram_read_bytes'] / MIB:7.1f}  "
                  f"write {r['dram_write_bytes'] / MIB:6.1f}  kept {w - r['dram_write_bytes'] / MIB:6.1f} MiB",
                  flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--target"]:
        target()
    else:
        main(sys.argv[1])
