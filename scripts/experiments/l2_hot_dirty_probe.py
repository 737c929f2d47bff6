"""Do L2 hits on a small hot set shorten how long the L2 keeps other lines dirty? (issue 12's
DRAM budget: torch flash's forward writes back all of O during the kernel, 67 MB at N 1024 with
B 16 H 16, where an LRU of 0.70 x 60 MiB, and the `inter` rows of l2_dirty_probe_h200.py, keep
about a quarter of the last 40 MiB of distinct traffic dirty; its traffic is mostly hits on K/V
tiles that every query block of a head re-reads, which neither the LRU's figure nor the `inter`
probe has.)

One kernel per configuration, 528 CTAs x 512 threads (4 per SM, all resident), 16-byte
ld.global.cg / st.global.cg (L1 bypassed), Nsight Compute's default cache control (L2 flushed and
invalidated before each kernel; dirty lines left at the end counted by no kernel). 64 rounds per
CTA; in each round a CTA reads its next share of a clean stream B (S bytes in all, read once),
then re-reads R bytes of a hot buffer of H MiB (the slice at a rotating offset, so every hot line
is read by many CTAs on both halves of the chip), then writes its next share of buffer A (W bytes
in all, written once). "kept" = W - DRAM write bytes; the hot reads' share of the L2's accesses is
the figure that varies (R x 528 x 64 over W + S + that). Rows with a spin wait after each round's
stores make the kernel long and its DRAM idle (a compute-bound kernel's O stores): does the L2
write dirty lines back while the DRAM has nothing else to do?

    python3 scripts/experiments/l2_hot_dirty_probe.py OUT.csv      (runs ncu over itself)
"""
from __future__ import annotations

import csv
import os
import subprocess
import sys

SRC = r"""
extern "C" __global__ void l2hot(int4* a, long long na, const int4* b, long long nb,
                                 const int4* hot, long long nhot, long long hot_per_round, long long spin,
                                 int* out) {
    int acc = 0;
    const long long g = gridDim.x, c = blockIdx.x;
    const long long pa = (na + g - 1) / g, pb = (nb + g - 1) / g;
    const long long a0 = c * pa, a1 = min(na, a0 + pa), b0 = c * pb, b1 = min(nb, b0 + pb);
    const int rounds = 64;
    const long long ra = (pa + rounds - 1) / rounds, rb = (pb + rounds - 1) / rounds;
    for (int r = 0; r < rounds; ++r) {
        const long long x0 = min(a1, a0 + r * ra), x1 = min(a1, x0 + ra);
        const long long y0 = min(b1, b0 + r * rb), y1 = min(b1, y0 + rb);
        for (long long i = y0 + threadIdx.x; i < y1; i += blockDim.x) { int4 v = __ldcg(b + i); acc ^= v.x ^ v.w; }
        if (nhot > 0) {
            const long long h0 = ((c * 37 + r * 11) * hot_per_round) % nhot;
            for (long long i = threadIdx.x; i < hot_per_round; i += blockDim.x) {
                int4 v = __ldcg(hot + (h0 + i) % nhot); acc ^= v.y ^ v.z;
            }
        }
        for (long long i = x0 + threadIdx.x; i < x1; i += blockDim.x) __stcg(a + i, make_int4((int)i, r, 2, 3));
        if (spin > 0) { const long long t0 = clock64(); while (clock64() - t0 < spin) { } }
    }
    if (acc == 0x7f3a2b1c) out[0] = acc;
}
"""
# (W MiB, S MiB, hot MiB, hot reads as a multiple of W, spin cycles after each round's stores)
CONFIGS = ([(32, s, 4, m, 0) for s in (0, 32) for m in (0, 1, 4, 16)]
           + [(64, 64, 4, m, 0) for m in (0, 4, 16)]
           + [(32, 32, h, 16, 0) for h in (1, 16)]
           + [(w, 0, 4, 0, spin) for w in (16, 32) for spin in (2_000, 20_000)]
           + [(32, 32, 4, 4, 20_000)])
METRICS = "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum"
MIB = 1 << 20
CTAS, ROUNDS = 528, 64


def hot_vecs_per_round(w_mib: int, mult: int) -> int:
    return mult * w_mib * MIB // 16 // (CTAS * ROUNDS)


def target() -> None:
    import cupy as cp
    k = cp.RawModule(code=SRC).get_function("l2hot")
    out = cp.zeros(1, dtype=cp.int32)
    a = cp.zeros(64 * MIB // 4, dtype=cp.int32)
    b = cp.random.randint(0, 1 << 30, size=64 * MIB // 4, dtype=cp.int32)
    hot = cp.random.randint(0, 1 << 30, size=16 * MIB // 4, dtype=cp.int32)
    for w, s, h, m, spin in CONFIGS:
        k((CTAS,), (512,), (a, cp.int64(w * MIB // 16), b, cp.int64(s * MIB // 16), hot,
                            cp.int64(h * MIB // 16 if m else 0), cp.int64(hot_vecs_per_round(w, m)),
                            cp.int64(spin), out))
        cp.cuda.runtime.deviceSynchronize()


def main(out_csv: str) -> None:
    sys.path.insert(0, os.getcwd())
    from iosim.measure.ncu import parse_csv
    cmd = ["ncu", "--clock-control", "none", "--metrics", METRICS, "--csv", "--page", "raw",
           "--print-units", "base", "-k", "regex:l2hot", "python3", __file__, "--target"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    rows = parse_csv(res.stdout)
    if len(rows) != len(CONFIGS):
        print(res.stdout[-3000:], res.stderr[-3000:])
        raise SystemExit(f"expected {len(CONFIGS)} kernels, got {len(rows)}")
    with open(out_csv, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["written_bytes", "streamed_bytes", "hot_bytes", "hot_read_bytes",
                     "spin_cycles_per_round", "dram_read_bytes", "dram_write_bytes", "ncu_time_s"])
        for (w, s, h, m, spin), r in zip(CONFIGS, rows):
            hot_read = hot_vecs_per_round(w, m) * 16 * CTAS * ROUNDS
            wr.writerow([w * MIB, s * MIB, h * MIB, hot_read, spin, r["dram_read_bytes"],
                         r["dram_write_bytes"], r["ncu_time_s"]])
            print(f"W {w:3d} S {s:3d} hot {h:2d} MiB x{m:2d} spin {spin:6d}  t {r['ncu_time_s'] * 1e6:7.1f} us  read {r['dram_read_bytes'] / MIB:7.1f}  "
                  f"write {r['dram_write_bytes'] / MIB:6.1f}  kept {w - r['dram_write_bytes'] / MIB:6.1f} MiB",
                  flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--target"]:
        target()
    else:
        main(sys.argv[1])
