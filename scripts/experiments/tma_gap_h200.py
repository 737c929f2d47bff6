"""How far apart in time the two halves of a shared sector may reach the L2 and still merge
(H200): the tma_pitch probe's TMA store kernel (scripts/experiments/tma_pitch_h200.py) at N 3008
with 168-column tiles (336-byte rows: tiles 2k and 2k + 1 share one sector per row, tiles 2k + 1
and 2k + 2 none), launched in an order that puts tile 2k + 1 about 2G launches after tile 2k.
G = 0 is side by side; large G is the probe's `order 1`. Time: CUDA events (median of 10);
Nsight Compute's DRAM reads count the halves that missed each other (a read-modify-write each).

    python3 scripts/experiments/tma_gap_h200.py table OUT.json
    python3 scripts/experiments/tma_gap_h200.py one G        # one launch, for ncu
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tma_pitch_h200 import TR, _nvrtc_cubin, tensor_map, timed_us, z_for  # noqa: E402

N, TC = 3008, 168
GAPS = (0, 8, 32, 64, 132, 264, 528, 1056, 2112, 4224)

SRC = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
extern "C" __global__ void __launch_bounds__(128) tma_store_map(const unsigned char* __restrict__ tmap,
        const int* __restrict__ order, int tiles_c, int tiles_r) {
    extern __shared__ __align__(1024) unsigned char smem[];
    int t = order[blockIdx.x];
    int tc = t % tiles_c, rr = t / tiles_c, tr = rr % tiles_r, m = rr / tiles_r;
    u32* s = (u32*)smem;
    for (int i = threadIdx.x; i < TILE_BYTES / 4; i += blockDim.x) s[i] = 0x3c003c00u + i;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        u32 src = (u32)__cvta_generic_to_shared(smem);
        asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];"
                     :: "l"(tmap), "r"(tc * TC), "r"(tr * TR_), "r"(m), "r"(src) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
}
"""


def launch_order(tiles_c: int, rows: int, gap: int) -> list:
    """Linear tile indices in launch order: the even-column tiles in row-major order, each
    odd-column tile 2k + 1 placed right after even tile number (its pair's index) + gap."""
    even = [r * tiles_c + c for r in range(rows) for c in range(0, tiles_c, 2)]
    odd = [r * tiles_c + c for r in range(rows) for c in range(1, tiles_c, 2)]
    out = []
    for s in range(len(even) + gap + 1):
        if s < len(even):
            out.append(even[s])
        k = s - gap
        if 0 <= k < len(odd):
            out.append(odd[k])
    assert sorted(out) == list(range(tiles_c * rows))
    return out


def runner(gap: int):
    import cupy as cp
    import hashlib
    import os
    import tempfile
    z = z_for(N)
    a = cp.zeros((z, N, N), dtype=cp.float16)
    tiles_c, tiles_r = -(-N // TC), -(-N // TR)
    cubin = _nvrtc_cubin(SRC, ["--gpu-architecture=sm_90a", "-std=c++17", f"-DTC={TC}",
                               f"-DTR_={TR}", f"-DTILE_BYTES={TR * TC * 2}"])
    path = os.path.join(tempfile.gettempdir(), hashlib.sha1(cubin).hexdigest() + ".cubin")
    Path(path).write_bytes(cubin)
    k = cp.RawModule(path=path).get_function("tma_store_map")
    smem = TR * TC * 2
    k.max_dynamic_shared_size_bytes = smem
    tmap = tensor_map(a.data.ptr, N, z, TC)
    order = cp.asarray(launch_order(tiles_c, tiles_r * z, gap), dtype=cp.int32)
    args = (tmap, order, cp.int32(tiles_c), cp.int32(tiles_r))
    grid = (int(order.size),)
    return (lambda: k(grid, (128,), args, shared_mem=smem)), (a, tmap, order)


def table(out: Path) -> None:
    rows = []
    for gap in GAPS:
        fn, keep = runner(gap)
        us = timed_us(fn)
        print(f"gap {gap:5d}  {us:8.1f} us", flush=True)
        rows.append({"gap": gap, "n": N, "tc": TC, "tr": TR, "z": z_for(N), "us": us})
        del keep
    out.write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "one":
        import cupy as cp
        fn, keep = runner(int(sys.argv[2]))
        fn()
        cp.cuda.Device().synchronize()
    else:
        table(Path(sys.argv[2]))
