"""Does a line read from both halves of the chip take more of the L2 than one read from one SM?
(issue 12's DRAM budget: attention's K/V tiles are read by CTAs on every SM; the reuse probe,
l2_reuse_probe.py, whose curve the model's L2 takes, re-reads tiles that one SM read.)

l2_reuse_probe.py's pattern with `share` extra readers: at step t CTA c reads its fresh tile
t*G + c and the fresh tiles of CTAs c + j*G/(share + 1), j = 1..share (so every fresh tile is read
by share + 1 CTAs spread over the grid in its first step), then, from step k on, re-reads the tile
CTA c + 1 read k steps earlier; a grid-wide barrier between steps. share 0 is the reuse probe's
own r = 1 configuration (run again here for a same-call comparison). Runs with no re-reads
(k = 0 below, 88 steps) give the DRAM bytes of the first reads alone per fresh tile, so

    re-read misses = (dram__bytes_read - fresh tiles x first-read bytes per tile) / re-read bytes.

    python3 scripts/experiments/l2_shared_reuse_probe.py OUT.csv      (runs ncu over itself)
"""
from __future__ import annotations

import csv
import os
import subprocess
import sys

SRC = r"""
extern "C" __global__ void l2share(const int4* buf, int tile_vecs, int steps, int k, int share,
                                   unsigned int* bar, int* out) {
    const int G = gridDim.x, c = blockIdx.x;
    int acc = 0;
    for (int t = 0; t < steps; ++t) {
        for (int j = 0; j <= share; ++j) {
            const int owner = (c + (j * G) / (share + 1)) % G;
            const long long fresh = ((long long)t * G + owner) * tile_vecs;
            for (int i = threadIdx.x; i < tile_vecs; i += blockDim.x) {
                int4 v = __ldcg(buf + fresh + i); acc ^= v.x ^ v.w;
            }
        }
        if (k > 0 && t >= k) {
            const long long again = ((long long)(t - k) * G + (c + 1) % G) * tile_vecs;
            for (int i = threadIdx.x; i < tile_vecs; i += blockDim.x) {
                int4 v = __ldcg(buf + again + i); acc ^= v.y ^ v.z;
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            atomicAdd(bar, 1u);
            const unsigned int want = (unsigned int)(t + 1) * G;
            while (*((volatile unsigned int*)bar) < want) { }
        }
        __syncthreads();
    }
    if (acc == 0x5a5a5a5a) out[c * blockDim.x + threadIdx.x] = acc;
}
"""
TILE_BYTES = 8192
MEASURED_STEPS = 48
KS = (8, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 24, 26, 28, 32)
SHARES = (0, 1, 3)
FIRST_ONLY_STEPS = 88
METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum",
           "lts__t_bytes.sum")


def configs() -> list:
    """(share, k) per kernel in launch order; k 0: first reads only."""
    return [(s, 0) for s in SHARES] + [(s, k) for s in SHARES for k in KS]


def steps_of(k: int) -> int:
    return FIRST_ONLY_STEPS if k == 0 else k + MEASURED_STEPS


def target() -> None:
    import cupy as cp
    g = cp.cuda.Device().attributes["MultiProcessorCount"]
    fn = cp.RawModule(code=SRC).get_function("l2share")
    vecs = TILE_BYTES // 16
    buf = cp.arange(FIRST_ONLY_STEPS * g * vecs * 4, dtype=cp.int32)
    out = cp.zeros(g * 256, dtype=cp.int32)
    bar = cp.zeros(1, dtype=cp.uint32)
    for s, k in configs():
        bar.fill(0)
        fn((g,), (256,), (buf, cp.int32(vecs), cp.int32(steps_of(k)), cp.int32(k), cp.int32(s),
                          bar, out))
        cp.cuda.runtime.deviceSynchronize()


def main(out_csv: str) -> None:
    sys.path.insert(0, os.getcwd())
    import cupy as cp
    from iosim.measure.ncu import ncu_command, parse_csv
    g = cp.cuda.Device().attributes["MultiProcessorCount"]
    cmd = ncu_command([__file__, "--target"], metrics=METRICS, kernel_regex="l2share")
    res = subprocess.run(cmd, capture_output=True, text=True)
    with open(out_csv + ".ncu_raw.csv", "w") as f:
        f.write(res.stdout)
    rows = parse_csv(res.stdout)
    want = configs()
    if len(rows) != len(want):
        print(res.stdout[-3000:], res.stderr[-3000:])
        raise SystemExit(f"expected {len(want)} kernels, got {len(rows)}")
    first_per_tile = {s: row["dram_read_bytes"] / (FIRST_ONLY_STEPS * g)
                      for (s, k), row in zip(want, rows) if k == 0}
    with open(out_csv, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["sm_count", "tile_bytes", "share", "k", "steps", "first_read_bytes_per_tile",
                     "reread_bytes", "steady_distance_bytes", "dram_read_bytes",
                     "dram_write_bytes", "reread_miss_fraction", "ncu_time_s"])
        for (s, k), row in zip(want, rows):
            again = MEASURED_STEPS * g * TILE_BYTES if k else 0
            dist = (2 * k * g - 1) * TILE_BYTES if k else 0
            miss = ((row["dram_read_bytes"] - steps_of(k) * g * first_per_tile[s]) / again
                    if k else 0.0)
            wr.writerow([g, TILE_BYTES, s, k, steps_of(k), f"{first_per_tile[s]:.1f}", again, dist,
                         row["dram_read_bytes"], row["dram_write_bytes"], f"{miss:.5f}",
                         row["ncu_time_s"]])
            print(f"share {s} k {k:3d} steady distance {dist / 2**20:6.1f} MiB  first-read "
                  f"bytes/tile {first_per_tile[s]:7.0f}  re-read misses {miss:7.2%}  "
                  f"({row['ncu_time_s'] * 1e6:7.1f} us)", flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--target"]:
        target()
    else:
        main(sys.argv[1])
