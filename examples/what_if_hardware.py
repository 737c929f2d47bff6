"""What-if hardware: double one resource of a GPU and see which schedules care.

    python examples/what_if_hardware.py [--seq 2048] [--gpu h100]

A schedule bound by DRAM (standard attention: S and P make the round trip through memory)
speeds up with DRAM bandwidth; one bound by the tensor cores (FA-2) with the MMA rate; FA-3
overlaps softmax with its GEMMs, so faster exponentials help it only while exp is on the
critical path. GPUs are `GpuSpec`s: `load_gpu(...).with_(field=value)` makes a variant.
"""
import argparse

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.sim import simulate

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--seq", type=int, default=2048)
ap.add_argument("--gpu", default="h100")
args = ap.parse_args()

base = load_gpu(args.gpu)
variants = {
    "as is": base,
    "2x DRAM bandwidth": base.with_(dram_bandwidth_bytes_per_s=2 * base.dram_bandwidth_bytes_per_s),
    "2x tensor cores": base.with_(**{  # the datasheet peak and the achievable rate both
        key: {k: (2 * v if v else v) for k, v in getattr(base, key).model_dump().items()}
        for key in ("tensor_flops_per_s", "tensor_flops_per_s_achievable")
        if getattr(base, key) is not None}),
    "2x exp units": base.with_(exp_per_clock_per_sm=2 * base.exp_per_clock_per_sm),
}
problem = AttentionProblem(seq_q=args.seq)
print(f"{base.name}, {problem.describe()}: speed-up over 'as is'")
print(f"{'':18s}" + "".join(f"{a:>10s}" for a in ("standard", "fa2", "fa3")))
results = {}
for name, gpu in variants.items():
    row = []
    for algo in ("standard", "fa2", "fa3"):
        results[name, algo] = simulate(build_schedule(problem, gpu, algo), gpu)
        row.append(results["as is", algo].time_s / results[name, algo].time_s)
    print(f"{name:18s}" + "".join(f"{x:10.2f}" for x in row))
print(f"{'bound as is':18s}" + "".join(f"{results['as is', a].bound_by:>10s}"
                                      for a in ("standard", "fa2", "fa3")))
