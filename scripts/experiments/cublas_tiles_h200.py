"""Which cuBLAS kernel (tile) torch.matmul runs for the standard attention's GEMMs, by shape:
S = Q Kᵀ ([z, N, d] × [z, d, N]) and O = P V ([z, N, N] × [z, N, d]) in fp16, as
iosim/kernels/run.py calls them, for z = batch × heads 1..512, N 512..8192, d 64 and 128. The
kernel names and grids come from the torch profiler's trace (CUPTI), one call per shape after a
warm-up call. The tile is in the name (nvjet_sm90_hsh_<M>x<N>_<K>x<stages>...).

    python3 scripts/experiments/cublas_tiles_h200.py OUT.json
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def kernels_of(fn):
    import torch
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        ev = json.load(open(f.name))["traceEvents"]
    return [{"name": e["name"], "grid": e.get("args", {}).get("grid"),
             "block": e.get("args", {}).get("block"), "dur_us": e.get("dur")}
            for e in ev if e.get("cat") == "kernel"]


def main(out: Path) -> None:
    import torch
    res = []
    for d in (64, 128):
        for n in (512, 1024, 2048, 4096, 8192):
            for z in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512):
                if z * n * n * 2 > 4 << 30:
                    continue
                q = torch.randn(1, z, n, d, device="cuda", dtype=torch.float16)
                k = torch.randn(1, z, n, d, device="cuda", dtype=torch.float16)
                p = torch.randn(1, z, n, n, device="cuda", dtype=torch.float16)
                row = {"d": d, "n": n, "z": z,
                       "qk": kernels_of(lambda: torch.matmul(q, k.transpose(-1, -2))),
                       "pv": kernels_of(lambda: torch.matmul(p, k))}
                res.append(row)
                print(d, n, z, [x["name"][:40] for x in row["qk"]], [(x["name"][:40], x["grid"]) for x in row["pv"]],
                      flush=True)
                del q, k, p
    out.write_text(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "rows": res}, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
