"""One launch each of the project's FA-1 forward at d 64 (B = 16384 / N, H 16, N 512, 1024,
2048, fp16, the validation tiling), for Nsight Compute's L1 counters of its cp.async copies
(`scripts/experiments/fa1_l1_hits_h200.sh`)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from iosim import AttentionProblem  # noqa: E402
from iosim.algorithms import build_schedule  # noqa: E402
from iosim.kernels.reference import random_inputs  # noqa: E402
from iosim.kernels.run import Launcher, device_inputs  # noqa: E402

for n in (512, 1024, 2048):
    p = AttentionProblem(batch=16384 // n, heads_q=16, seq_q=n, head_dim=64, dtype="fp16")
    ln = Launcher(build_schedule(p, "h200", "fa1"))
    ln.run(device_inputs(random_inputs(p, np.random.default_rng(1)), p.dtype))
