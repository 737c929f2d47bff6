"""The SM clock while the project's FA-2 backward (fa2_bwd.cu) runs on the H200, two ways at
once: nvidia-smi's clocks.sm / power.draw sampled every 100 ms while the d 128 B4 H16 N4096 row's
main kernel runs back to back for ~6 s, and clock64 cycles over %globaltimer ns of every CTA of
a traced launch of the same kernel in the middle of that stretch.

    OUT=<dir> python3 scripts/fa2_bwd_clock_h200.py      (writes <dir>/fa2_bwd_clock_h200.json)
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
OUT = Path(os.environ.get("OUT", "out"))


def main():
    import cupy as cp
    import numpy as np
    from fa2_bwd_atomics_h200 import defines, problem_of
    from iosim import build_schedule
    from iosim.kernels.build import get_kernel
    from iosim.kernels.reference import random_inputs
    from iosim.kernels.run import Launcher, device_inputs, forward_schedule, run_schedule
    from iosim.kernels.trace import decode
    from iosim.schedule import expand

    OUT.mkdir(parents=True, exist_ok=True)
    res = {"command": "OUT=<dir> python3 scripts/fa2_bwd_clock_h200.py", "runs": []}
    for label, b, h, n in (("row-B4-H16-N4096", 4, 16, 4096), ("1wave-32cta-N4096", 1, 1, 4096)):
        p = problem_of(b, h, n)
        s = build_schedule(p, "h200", "fa2")
        T = device_inputs(random_inputs(p, np.random.default_rng(0), with_grad=True), "fp16")
        run_schedule(forward_schedule(p, "fa2", "h200"), T)
        run_schedule(s, T)
        kern, ln = s.kernels[1], Launcher(s)
        la = kern.launch
        args = (T["Q"], T["K"], T["V"], T["dO"], T["LSE"], T["D"], T["dQaccum"], T["dK"], T["dV"],
                *ln._dims())
        k = get_kernel("fa2_bwd.cu", "fa2_bwd", defines(s, 0), "fp16", False, la.smem_bytes_per_cta)
        kt = get_kernel("fa2_bwd.cu", "fa2_bwd", defines(s, 0), "fp16", True, la.smem_bytes_per_cta)
        cap = len(list(expand(kern.program(0)))) + 64
        buf = cp.zeros(la.num_ctas * (1 + 4 * cap), dtype=np.uint64)
        launch = lambda: k(tuple(la.grid), (la.threads_per_cta,), (*args, np.uint64(0), np.int32(0)),
                           shared_mem=la.smem_bytes_per_cta)
        for _ in range(3):
            launch()
        cp.cuda.runtime.deviceSynchronize()
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active",
                                "--format=csv,noheader,nounits", "-lms", "100"],
                               stdout=subprocess.PIPE, text=True)
        t0 = time.time()
        launches = 0
        traced = False
        while time.time() - t0 < 6.0:
            for _ in range(20 if b > 1 else 300):
                launch()
                launches += 1
            if not traced and time.time() - t0 > 3.0:
                kt(tuple(la.grid), (la.threads_per_cta,), (*args, buf, np.int32(cap)),
                   shared_mem=la.smem_bytes_per_cta)
                traced = True
            cp.cuda.runtime.deviceSynchronize()
        smi.terminate()
        lines = [l.strip() for l in smi.communicate()[0].splitlines() if l.strip()]
        tr = decode(buf.get(), kern.name, tuple(la.grid), la.threads_per_cta, la.smem_bytes_per_cta, cap)
        ghz = [(e[-1].clock - e[0].clock) / (e[-1].t_ns - e[0].t_ns) for e in tr.ctas if len(e) > 2]
        clocks = [float(l.split(",")[0]) for l in lines if l.split(",")[0].strip().replace(".", "").isdigit()]
        row = {"config": label, "launches": launches, "seconds": time.time() - t0,
               "smi_samples": lines, "smi_sm_clock_mhz_median": statistics.median(clocks) if clocks else None,
               "clock64_per_globaltimer_ghz": {"median": statistics.median(ghz), "min": min(ghz), "max": max(ghz)}}
        res["runs"].append(row)
        print(label, "smi median MHz", row["smi_sm_clock_mhz_median"], "clock64/globaltimer",
              row["clock64_per_globaltimer_ghz"], "samples", lines[len(lines) // 2:len(lines) // 2 + 3], flush=True)
        del T
        cp.get_default_memory_pool().free_all_blocks()
    (OUT / "fa2_bwd_clock_h200.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
