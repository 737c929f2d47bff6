"""Run torch's flash back end once per configuration (forward and backward, d 64/128/256), for
Nsight Compute to read each kernel's launch figures: grid, block, registers per thread,
dynamic shared memory and the occupancy limits (scripts/fa2_mma_ldsm_h200.sh)."""
import sys

sys.path.insert(0, ".")
from iosim.problem import AttentionProblem          # noqa: E402
from iosim.measure.torch_sdpa import make_op        # noqa: E402

CONFIGS = [dict(batch=4, heads_q=16, heads_kv=16, seq_q=4096, seq_kv=4096, head_dim=d,
                causal=False, direction=dr) for d in (64, 128, 256) for dr in ("fwd", "bwd")]

for cfg in CONFIGS:
    p = AttentionProblem(**cfg)
    op = make_op(p, "torch_flash", 1)
    if op is None:
        print("refused", cfg, flush=True)
        continue
    op(0)
    print("ran", cfg, flush=True)
