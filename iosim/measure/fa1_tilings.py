"""Clock64 cycles per (i, j) step of fa1_fwd.cu at tilings other than the validation rows'
(held-out check of fa1's latency figures, FWD_CHUNK/EPILOGUE/MERGE_LATENCY_CYCLES): a lone CTA
per SM (grid B 1 x H = SM count, one KV head, K/V L2-resident), N 1024, not causal; each
CTA's main loop timed by thread 0 as iosim.measure.step_cycles does (its `measure`).

    python3 -m iosim.measure.fa1_tilings -o OUT.json      (on the GPU machine; needs cupy)
"""
from __future__ import annotations

import argparse
import json
import time

# (d, Br, Bc, warps): column groups WN = warps / min(warps, Br / 16), chunks = Bc / CHK
TILINGS = ((64, 64, 448, 8), (128, 128, 224, 8), (64, 64, 224, 8), (64, 128, 224, 8),
           (128, 64, 224, 8), (64, 64, 448, 4), (64, 64, 128, 8), (128, 128, 128, 8))
N = 1024


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    import cupy as cp
    from iosim.measure.step_cycles import measure
    props = cp.cuda.runtime.getDeviceProperties(0)
    sms = props["multiProcessorCount"]
    rows = []
    for d, bq, bkv, w in TILINGS:
        try:
            r = measure("fa1_fwd", "real", 1, sms, 1, N, N, d, bq, bkv, w, 1, False,
                        f"fa1 d{d} {bq}x{bkv} w{w} lone CTA")
        except Exception as e:   # noqa: BLE001 (a tiling that does not build is reported)
            r = {"label": f"fa1 d{d} {bq}x{bkv} w{w}", "error": str(e)[:300]}
        rows.append(r)
        print(json.dumps(r), flush=True)
    out = {"device": {"name": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
                      "sm_count": sms}, "measured_on": time.strftime("%Y-%m-%d", time.gmtime()),
           "method": __doc__, "rows": rows}
    with open(args.output, "w") as f:
        json.dump(out, f, indent=2, sort_keys=True)
    for r in rows:
        if "error" in r:
            print(r["label"], "ERROR", r["error"][:120])
        else:
            print(f"{r['label']:34s} cyc/step {r['cycles_per_step_median']:8.0f} regs {r['num_regs']} "
                  f"local {r['local_size_bytes']} clk {r['sm_clock_hz_median'] / 1e6:.0f} MHz finite {r['output_finite']}")


if __name__ == "__main__":
    main()
