"""The mask phase of the project's FA-2 forward kernel (fa2.MASK_PHASE_CYCLES_PER_ELEMENT) from
its committed lone-CTA traces, and the check against the forced-mask H200 measurement.

Traces (tests/data/traces): in each CTA, the clock64 gap from a step's S = QKᵀ record to its exp
record, masked steps (the last step of a causal Q block, or a ragged one) against the same
CTA's unmasked steps; both carry the same records, so the difference is the mask's. Over the
step's score elements (block_q × block_kv).

Check: the simulator's time for the N 4096 problem with every step masked (the kernel built
with IOSIM_FORCE_MASK=1, measurements/h200/mask/mask_cost_h200.json,
scripts/experiments/mask_cost_h200.py) less its time as built, against the measured delta.

    python scripts/mask_phase_from_traces.py
"""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from iosim import AttentionProblem, load_gpu  # noqa: E402
from iosim.algorithms import build_schedule  # noqa: E402
from iosim.algorithms import fa2  # noqa: E402
from iosim.clock import sustained_simulation  # noqa: E402
from iosim.schedule import Loop  # noqa: E402

MEASURED = ROOT / "measurements/h200/mask/mask_cost_h200.json"


def forced_mask_program(problem, t, b: int, h: int, i: int, cycles_per_element: float) -> tuple:
    """fa2.fwd_program with every KV step masked, as the kernel built with IOSIM_FORCE_MASK=1
    runs it (a non-causal problem of whole KV blocks)."""
    if problem.causal or problem.seq_kv % t.block_kv:
        raise ValueError("the forced-mask measurement is of non-causal problems of whole KV blocks")
    body = fa2.kv_iteration(problem, t, h // problem.group_size, b, t.block_kv, True, False,
                            mask_cycles_per_element=cycles_per_element)
    return tuple(replace(item, body=body) if isinstance(item, Loop) else item
                 for item in fa2.fwd_program(problem, t, b, h, i))


def forced_delta_s(d: int, cycles_per_element: float) -> float:
    """Simulated time of the forced-mask problem (every step masked at this phase) less the
    time as built (no step masked), N 4096, H 16, B 4, fp16, non-causal."""
    gpu = load_gpu("h200-calibrated")
    p = AttentionProblem(batch=4, heads_q=16, seq_q=4096, head_dim=d, dtype="fp16")
    base = build_schedule(p, gpu, "fa2")
    t = base.tiling["fwd"]
    k = base.kernels[0]

    def forced_program(cta: int, k=k):
        i, b, h = k.cta_coord(cta)
        return forced_mask_program(p, t, b, h, i, cycles_per_element)
    forced = replace(base, kernels=(replace(k, program=forced_program),))
    times = [sustained_simulation(s, gpu, l2_protocol="ncu", time_protocol="warm")[0].time_s
             for s in (base, forced)]
    return times[1] - times[0]


TRACES = {64: "tests/data/traces/fa2_fwd_n200_d64_causal.json",
          128: "tests/data/traces/fa2_fwd_q130_kv300_gqa_d128_causal.json"}


def trace_phase(d: int) -> tuple:
    """(cycles per score element, tiling) of the mask in the d trace: the mean over CTAs that
    have both kinds of step of (mean masked S -> exp gap − mean unmasked gap) / elements."""
    from iosim.kernels.trace import Trace
    raw = json.loads((ROOT / TRACES[d]).read_text())
    t = raw["tiling"]["fwd"]
    diffs = []
    for evs in Trace.load(ROOT / TRACES[d]).kernels[0].ctas:
        gaps = [b.clock - a.clock for a, b in zip(evs, evs[1:])
                if a.name == "S=QK^T" and b.kind == "exp"]
        if len(gaps) < 2:
            continue
        # the causal loop's masked step is the last (the kernels go from the first KV block up)
        unmasked, masked = gaps[:-1], gaps[-1:]
        big = [g for g in unmasked if g > 1.2 * min(unmasked)]   # other masked (ragged) steps
        unmasked = [g for g in unmasked if g not in big]
        masked += big
        diffs.append(sum(masked) / len(masked) - sum(unmasked) / len(unmasked))
    return sum(diffs) / len(diffs) / (t["block_q"] * t["block_kv"]), (t["block_q"], t["block_kv"])


def main() -> None:
    meas = json.loads(MEASURED.read_text())
    for d in (64, 128):
        cpe, tile = trace_phase(d)
        m = meas[f"fa2-d{d}"]
        target = m["time_s_force1"] - m["time_s_force0"]
        print(f"fa2_fwd d {d} tile {tile[0]}x{tile[1]}: {cpe:.4f} cycles per score element (traces); "
              f"forced mask measured +{target * 1e6:.1f} us, simulated +{forced_delta_s(d, round(cpe, 4)) * 1e6:.1f} us")


if __name__ == "__main__":
    main()
