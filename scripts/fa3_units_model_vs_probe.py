"""The wgmma/softmax probe's roles (iosim/measure/wgmma_overlap.py) run through the model's SM units:
pipeline.run_ops on SmUnits with MmaCost, one warpgroup = one SimPy process issuing one role's
work (the d = 64 FA-3 consumer's S = Q K^T group, its P V group, its softmax tile) on its own
wgmma stream (each group noted on the SM's units, as pipeline._Consumers does), as a consumer
warpgroup of the fa3 schedule does. Prints the model's cycles per group / tile beside the
probe's second H200 run (benchmarks/results/wgmma_overlap_h200_run2.txt): the softmax tiles on
the SM's compute.SoftmaxTileServer (whose constants are the softmax, softmax x n, mma+softmax and
mma+mma+softmax rows) and the wgmma groups at their latency plus the SM's rate
(machine.wgmma_group_latency_cycles, from the mma and mma_rs rows). The probe runs each role's
work for the whole run (4000 groups beside 2000 tiles), and so does this (2N groups, N tiles).
Run from the repository root:
python scripts/fa3_units_model_vs_probe.py"""
import simpy
from iosim import load_gpu
from iosim.machine import SmRates, MmaCost
from iosim.schedule import Mma, Exp, Alu, Pipeline
from iosim.sim.compute import SmUnits
from iosim.sim.memory import Server
from iosim.sim import pipeline as pl

gpu = load_gpu("h200-calibrated")
CLK = gpu.clock_hz
pipe = Pipeline(stages=2, warp_specialized=True, consumer_warpgroups=3, intra_overlap=True)
cost = MmaCost(gpu, "fp16", pipe, 512, 2)
S = Mma("S=QK^T", 192, 128, 64)
PV = Mma("O+=PV", 192, 64, 128)
SOFT = (Alu("softmax", 3 * 3 * 8192), Exp("exp", 3 * (8192 + 64)), Alu("pack P", 3 * 4096), Alu("rescale", 3 * 4096))
SH = 1 / 3
EXP = (Exp("exp", 8192),)

def role_ops(role):
    return {"mma": (S,), "mma_rs": (PV,), "softmax": SOFT}[role]

def run(roles, n=200):
    env = simpy.Environment()
    units = SmUnits(SmRates.of(gpu, "fp16"))
    ctx = pl.CtaContext(env, units, None, pipe, mma=cost, cycle_s=1 / CLK)
    ends = {}
    def wg(i, role):
        stream = Server(units.tensor.rate)
        if role == "intra":
            for _ in range(n):
                now = env.now
                f = max(units.tensor.reserve(now, cost.work(S) * SH)[1], stream.reserve(now, cost.stream_work(S, SH))[1])
                units.note_wgmma(stream, f)
                yield from pl.run_ops(ctx, SOFT, {}, SH, [0]*4, False, stream)
                if f > env.now:
                    yield env.timeout(f - env.now)
        else:
            for _ in range(2 * n if role in ("mma", "mma_rs") else n):   # the probe: 4000 groups, 2000 tiles
                if role in ("mma", "mma_rs"):
                    op = S if role == "mma" else PV
                    now = env.now
                    f = max(units.tensor.reserve(now, cost.work(op) * SH)[1], stream.reserve(now, cost.stream_work(op, SH))[1])
                    units.note_wgmma(stream, f)
                    yield env.timeout(f - now)
                else:
                    yield from pl.run_ops(ctx, role_ops(role), {}, SH, [0]*4, False, stream)
        ends[i] = env.now
    for i, r in enumerate(roles):
        env.process(wg(i, r))
    env.run()
    return [ends[i] * CLK / (2 * n if r in ("mma", "mma_rs") else n) for i, r in enumerate(roles)]

MEAS = {  # probe run 2, cycles per unit of work (group or tile), from benchmarks/results/wgmma_overlap_h200_run2.txt
    ("mma",): [2065834/4000], ("mma_rs",): [2696756/4000], ("softmax",): [1826874/2000],
    ("intra",): [4028717/4000], ("mma", "mma"): [2251806/4000]*2, ("softmax", "softmax"): [2730300/2000]*2,
    ("mma", "softmax"): [2425801/4000, 2078163/2000], ("mma_rs", "softmax"): [2984728/4000, 2081482/2000],
    ("mma", "softmax", "softmax"): [2563246/4000, 3219498/2000, 3219498/2000],
    ("mma", "mma", "softmax"): [2622340/4000, 2617054/4000, 2471663/2000],
    ("mma", "mma", "mma"): [3133236/4000]*3, ("softmax",)*3: [3660683/2000]*3,
    ("mma_rs", "mma_rs"): [2825805/4000]*2, ("mma_rs",)*3: [3259094/4000]*3,
    ("mma", "mma_rs"): [2076832/4000, 3264812/4000], ("intra", "intra"): [6767028/4000]*2,
}
def main():
    print("cycles per group / tile, model / measured (error)")
    for roles, meas in MEAS.items():
        m = run(roles)
        print(f"{'+'.join(roles):24s} " + "  ".join(f"{a:5.0f}/{b:5.0f} ({a / b - 1:+4.0%})" for a, b in zip(m, meas)))


if __name__ == "__main__":
    main()
