"""L2 miss rate by reuse distance for lines read from all over the chip, and for dirty lines
(H200; the measurement docs/validation.md "DRAM bytes" asks for). Each kernel makes `passes`
passes over a buffer of F bytes (16-byte ld.global.cg / st.global.cg, L1 bypassed); between two
touches of a line every other line of the buffer is touched once, so each re-touch has LRU
stack distance F. Nsight Compute (default cache control: L2 flushed and invalidated before
each kernel, dirty lines left at its end not counted) gives the DRAM bytes.

Variants (grid 528 CTAs × 512 threads, 4 per SM):
  rotating      pass p gives CTA c the chunk of CTA (c + 67 p) mod grid: one reader per line
                per pass, a different SM each pass (repeats l2_probe.csv's read_rotating)
  shared_all    every CTA reads the whole buffer each pass, CTA c starting at chunk c: every
                line is read by all 528 CTAs (both L2 partitions' SMs) once per pass, as K/V
                tiles are read by every CTA of a head
  rmw_rotating  as rotating, each pass reads and rewrites every element (a dirty line
                re-read and re-dirtied, as FA-1's O tiles and a backward's dQ are)
  write_read    pass 0 writes the buffer (dirty, never read), passes 1.. read it, rotating
  mix_w1r3      one pass; element i is written if i % 4 == 0, else read: how many dirty bytes
                the L2 keeps at the kernel's end while clean lines stream past them (a cap on
                dirty bytes keeps min(F/4, cap); a cap on a dirty line's stack distance keeps
                only those within it of the end)
  mix_w1r1      the same, i % 2 == 0 written
  write_once    one pass writing the whole buffer with 16-byte coalesced stores: the dirty
                bytes left at the end (l2_probe.csv's write_once, repeated in this session)
  write_once_frag  the same bytes written by 4-byte stores in an MMA accumulator fragment's
                order (each warp store covers 16 B of 8 lines, as fa2_fwd.cu's O store does;
                torch flash and cuDNN stage O through shared memory and store it coalesced):
                whether partial-line stores are kept dirty differently (validation rows
                with 67 MB of O: the project's FA-2 forward writes 8-18 MB less than O, torch
                flash at least O at 8 of its 9 shapes)

    python3 scripts/experiments/l2_sharing_probe_h200.py OUT.csv      (runs ncu over itself)
"""
from __future__ import annotations

import csv
import os
import subprocess
import sys

SRC = r"""
__device__ __forceinline__ long long chunk_of(int variant, int p, long long c, long long g) {
    return (variant == 1) ? c : (c + 67LL * p) % g;
}
extern "C" __global__ void l2share(int4* buf, long long n, int passes, int variant, int* out) {
    int acc = 0;
    long long g = gridDim.x;
    long long per = (n + g - 1) / g;                 // elements per chunk
    for (int p = 0; p < passes; ++p) {
        if (variant == 1) {                           // shared_all: the whole buffer, from chunk c
            for (long long k = 0; k < g; ++k) {
                long long ch = (blockIdx.x + k) % g;
                long long hi = min(n, (ch + 1) * per);
                for (long long i = ch * per + threadIdx.x; i < hi; i += blockDim.x) {
                    int4 v = __ldcg(buf + i);
                    acc ^= v.x ^ v.y ^ v.z ^ v.w;
                }
            }
            continue;
        }
        if (variant >= 4 && p > 0) break;             // the mixes and write_once*: one pass
        long long ch = chunk_of(variant, p, blockIdx.x, g);
        long long hi = min(n, (ch + 1) * per);
        if (variant == 7) {     // write_once_frag: 4-byte stores in an MMA fragment's order
            int* w = reinterpret_cast<int*>(buf);
            int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
            // a warp's block: 64 int4 = 8 lines of 128 B; store k writes 16 B of each line
            // (lane / 4: the line, lane % 4: the int), as one accumulator row-pair store does
            for (long long b = ch * per + 64LL * warp; b < hi; b += 64LL * nw) {
                for (int k = 0; k < 8; ++k) {
                    long long e = b * 4 + (lane >> 2) * 32 + k * 4 + (lane & 3);
                    if (e < hi * 4) __stcg(w + e, (int)e ^ k);
                }
            }
            break;
        }
        for (long long i = ch * per + threadIdx.x; i < hi; i += blockDim.x) {
            if (variant >= 4) {                                      // mix_w1r3, mix_w1r1
                if (i % (variant == 4 ? 4 : 2) == 0) {
                    __stcg(buf + i, make_int4((int)i, p, 2, 3));
                } else {
                    int4 v = __ldcg(buf + i);
                    acc ^= v.x ^ v.y ^ v.z ^ v.w;
                }
            } else if (variant == 6) {                               // write_once
                __stcg(buf + i, make_int4((int)i, p, 2, 3));
            } else if (variant == 0 || (variant == 3 && p > 0)) {   // read
                int4 v = __ldcg(buf + i);
                acc ^= v.x ^ v.y ^ v.z ^ v.w;
            } else if (variant == 2) {                               // read + rewrite
                int4 v = __ldcg(buf + i);
                v.x += 1;
                __stcg(buf + i, v);
            } else {                                                 // write_read, pass 0
                __stcg(buf + i, make_int4((int)i, p, 2, 3));
            }
        }
        __syncthreads();
    }
    if (acc == 0x7f3a2b1c) out[0] = acc;
}
"""
VARIANTS = ("rotating", "shared_all", "rmw_rotating", "write_read", "mix_w1r3", "mix_w1r1",
            "write_once", "write_once_frag")
SIZES_MIB = (16, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64, 72)
PASSES = 4
METRICS = "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum"
# the L2 sectors one partition sent the other (Nsight Compute's "L2 Fabric"; A100 whitepaper:
# each partition caches data for the SMs of the GPCs connected to it): asked for first, the
# run repeated without it if this ncu does not know the metric
FABRIC = "lts__t_sectors_srcunit_ltcfabric.sum"


def target() -> None:
    import cupy as cp
    k = cp.RawModule(code=SRC).get_function("l2share")
    out = cp.zeros(1, dtype=cp.int32)
    for mib in SIZES_MIB:
        buf = cp.random.randint(0, 1 << 30, size=mib * (1 << 20) // 4, dtype=cp.int32)
        n = buf.size // 4
        for v in range(len(VARIANTS)):
            k((528,), (512,), (buf, cp.int64(n), cp.int32(PASSES), cp.int32(v), out))
            cp.cuda.runtime.deviceSynchronize()
        del buf


def fabric_sectors(text: str) -> list:
    """The FABRIC column of ncu's raw CSV, one value per kernel in launch order."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(lines))
    if not rows or FABRIC not in rows[0]:
        return []
    at = rows[0].index(FABRIC)
    body = [r for r in rows[1:] if r[0].strip().isdigit()]     # the units row skipped
    return [float(r[at].replace(",", "")) for r in body]


def main(out_csv: str) -> None:
    sys.path.insert(0, os.getcwd())
    from iosim.measure.ncu import parse_csv
    want = len(SIZES_MIB) * len(VARIANTS)
    for metrics in (f"{METRICS},{FABRIC}", METRICS):
        cmd = ["ncu", "--clock-control", "none", "--metrics", metrics, "--csv", "--page", "raw",
               "--print-units", "base", "-k", "regex:l2share", "python3", __file__, "--target"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        rows = parse_csv(res.stdout)
        if len(rows) == want:
            break
        print(f"ncu with {metrics}: {len(rows)} kernels; {res.stderr[-500:]}", flush=True)
    fabric = fabric_sectors(res.stdout) if FABRIC in metrics else [float("nan")] * len(rows)
    if len(rows) != want:
        print(res.stdout[-3000:], res.stderr[-3000:])
        raise SystemExit(f"expected {len(SIZES_MIB) * len(VARIANTS)} kernels, got {len(rows)}")
    it = iter(rows)
    with open(out_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "buffer_bytes", "passes", "dram_read_bytes", "dram_write_bytes",
                    "ncu_time_s", "l2_fabric_sectors"])
        fab = iter(fabric)
        for mib in SIZES_MIB:
            for v in VARIANTS:
                r = next(it)
                w.writerow([v, mib << 20, 1 if v.startswith(("mix", "write_once")) else PASSES, r["dram_read_bytes"], r["dram_write_bytes"],
                            r["ncu_time_s"], next(fab)])
                b = mib << 20
                print(f"{v:13s} {mib:3d} MiB  read/F {r['dram_read_bytes'] / b:6.3f}  "
                      f"write/F {r['dram_write_bytes'] / b:6.3f}  {r['ncu_time_s'] * 1e3:7.3f} ms",
                      flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--target"]:
        target()
    else:
        main(sys.argv[1])
