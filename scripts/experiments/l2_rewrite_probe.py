"""Does rewriting a small hot set of lines push other dirty lines out of the L2? (issue 12's
DRAM budget: torch's flash forward spills ≈ 7.4 KB of registers per CTA and KV step, and every
spill store reaches the L2 (measurements/h200/flash_local/), a few MB of lines rewritten
hundreds of times; its DRAM writes are O's whole 67 MB where fa2_fwd.cu, with no spills, leaves
≈ 12 MB of O dirty at the kernel's end.) If the L2's dirty cap counts distinct dirty lines, a
hot set far below the cap costs nothing; if write-back is driven by the write traffic itself,
the cold lines go as the hot volume grows.

One kernel per configuration, 528 CTAs × 256 threads (all resident), 16-byte st.global.cg, under
Nsight Compute's default cache control (L2 flushed and invalidated before each kernel; dirty
lines left at a kernel's end are counted by no kernel), so DRAM write bytes = what the L2 wrote
back during the kernel. Each CTA owns 1/528 of buffer A (W MiB in all, written once) and of a
hot set (H MiB in all) it rewrites k times:

  then        the CTA writes its chunk of A, then rewrites its hot chunk k times
  inter       64 rounds of (1/64 of its A chunk, then k/64 rewrites of its hot chunk), as a
              spilling kernel's O stores amid its spills
  local_then  as `then`, the hot set being each thread's own 32-byte local array (a volatile
              array indexed at run time: local-memory stores, as spills are): H = 4.1 MiB

    python3 scripts/experiments/l2_rewrite_probe.py OUT.csv      (runs ncu over itself)
"""
from __future__ import annotations

import csv
import os
import subprocess
import sys

SRC = r"""
extern "C" __global__ void l2rewrite(int4* a, long long na, int4* h, long long nh, int k,
                                     int mode, int* out) {
    const long long g = gridDim.x, c = blockIdx.x;
    const long long pa = (na + g - 1) / g, ph = (nh + g - 1) / g;
    const long long a0 = c * pa, a1 = min(na, a0 + pa), h0 = c * ph, h1 = min(nh, h0 + ph);
    volatile int local[8];
    const int rounds = mode == 1 ? 64 : 1;
    const int per_round = mode == 1 ? k / 64 : k;
    const long long ra = (pa + rounds - 1) / rounds;
    for (int r = 0; r < rounds; ++r) {
        const long long x0 = min(a1, a0 + r * ra), x1 = min(a1, x0 + ra);
        for (long long i = x0 + threadIdx.x; i < x1; i += blockDim.x)
            __stcg(a + i, make_int4((int)i, r, 2, 3));
        for (int p = 0; p < per_round; ++p) {
            if (mode == 2) {
                for (int q = 0; q < 8; ++q) local[(threadIdx.x + p + q) & 7] = p + q + r;
            } else {
                for (long long i = h0 + threadIdx.x; i < h1; i += blockDim.x)
                    __stcg(h + i, make_int4((int)i, p, r, 4));
            }
        }
    }
    if (mode == 2 && local[threadIdx.x & 7] == 0x7f3a2b1c) out[0] = 1;
}
"""
MODES = {"then": 0, "inter": 1, "local_then": 2}
# (mode, W MiB, H MiB, k)
CONFIGS = ([("then", w, 0, 0) for w in (16, 24, 32, 48, 64)]
           + [("then", w, 2, k) for w in (8, 16, 24) for k in (4, 16, 64, 256)]
           + [("inter", 16, 2, k) for k in (64, 256, 1024)]
           + [("local_then", w, 0, k) for w in (8, 16) for k in (16, 64, 256, 1024)])
METRICS = ("dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,"
           "lts__t_sectors_op_write.sum")
MIB = 1 << 20
LOCAL_MIB = 528 * 256 * 32 / MIB


def target() -> None:
    import cupy as cp
    fn = cp.RawModule(code=SRC).get_function("l2rewrite")
    out = cp.zeros(1, dtype=cp.int32)
    a = cp.zeros(64 * MIB // 4, dtype=cp.int32)
    h = cp.zeros(4 * MIB // 4, dtype=cp.int32)
    for mode, w, hm, k in CONFIGS:
        fn((528,), (256,), (a, cp.int64(w * MIB // 16), h, cp.int64(hm * MIB // 16),
                            cp.int32(k), cp.int32(MODES[mode]), out))
        cp.cuda.runtime.deviceSynchronize()


def main(out_csv: str) -> None:
    sys.path.insert(0, os.getcwd())
    from iosim.measure.ncu import parse_csv
    cmd = ["ncu", "--clock-control", "none", "--metrics", METRICS, "--csv", "--page", "raw",
           "--print-units", "base", "-k", "regex:l2rewrite", "python3", __file__, "--target"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    with open(out_csv + ".ncu_raw.csv", "w") as f:     # every metric, as ncu printed it
        f.write(res.stdout)
    rows = parse_csv(res.stdout)
    if len(rows) != len(CONFIGS):
        print(res.stdout[-3000:], res.stderr[-3000:])
        raise SystemExit(f"expected {len(CONFIGS)} kernels, got {len(rows)}")
    with open(out_csv, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["mode", "written_bytes", "hot_bytes", "rewrites", "dram_read_bytes",
                     "dram_write_bytes", "ncu_time_s"])
        for (mode, w, hm, k), r in zip(CONFIGS, rows):
            hot = LOCAL_MIB if mode == "local_then" else hm
            wr.writerow([mode, w * MIB, hot * MIB, k, r["dram_read_bytes"],
                         r["dram_write_bytes"], r["ncu_time_s"]])
            print(f"{mode:10s} W {w:3d} H {hot:4.1f} k {k:5d}  read {r['dram_read_bytes'] / MIB:7.1f}"
                  f"  write {r['dram_write_bytes'] / MIB:7.1f} MiB  {r['ncu_time_s'] * 1e6:8.1f} us",
                  flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--target"]:
        target()
    else:
        main(sys.argv[1])
