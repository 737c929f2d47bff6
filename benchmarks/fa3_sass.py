"""Static SASS instruction mix of the fa3 kernel (and of the wgmma/softmax probe).

    python3 benchmarks/fa3_sass.py OUT.txt      # needs NVRTC (cuda-bindings) and cuobjdump

For each build (the fa3 schedule's tiling at d = 64 and d = 128, all overlaps on) the cubin's
instructions are counted by opcode (cuobjdump -sass). The KV loop body holds the softmax
once per copy of it (the intra-overlapped loop has a peeled first iteration), so counts per
MUFU.EX2 give the instructions a score element costs: the per-element issue work the model
charges (machine.MmaCost.issue_work_per_op)."""
from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iosim import AttentionProblem, build_schedule  # noqa: E402

OP = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)")


def histogram(cubin: bytes) -> collections.Counter:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        sass = subprocess.run(["cuobjdump", "-sass", path], capture_output=True, text=True).stdout
    return collections.Counter(m.group(1) for m in OP.finditer(sass))


def describe(name: str, h: collections.Counter) -> list:
    ex2 = h.get("MUFU.EX2", 0)
    lines = [f"## {name}: {sum(h.values())} instructions, MUFU.EX2 {ex2}"]
    for op, n in h.most_common(40):
        lines.append(f"  {op:24s} {n:6d}" + (f"   {n / ex2:6.3f} per EX2" if ex2 else ""))
    return lines


def main(out: str) -> int:
    from iosim.kernels.hopper import FULL, compile_cubin, defines
    lines = []
    for d, causal in ((64, False), (128, False)):
        p = AttentionProblem(batch=1, heads_q=16, seq_q=4096, head_dim=d, causal=causal)
        t = build_schedule(p, "h200", "fa3").tiling["fwd"]
        cubin, _ = compile_cubin(defines(p, t, FULL), "fp16", False)
        lines += describe(f"fa3_fwd d={d} {t.describe()} (causal build flag is runtime: {causal})",
                          histogram(cubin))
    from iosim.measure.wgmma_overlap import PROBE_SRC
    from iosim.kernels.hopper import _nvrtc_cubin
    cubin = _nvrtc_cubin(PROBE_SRC, ["--gpu-architecture=sm_90a", "-std=c++17", "-DPROBE_NT=256"])
    lines += describe("wgmma_overlap probe (all roles)", histogram(cubin))
    Path(out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
