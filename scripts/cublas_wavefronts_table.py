"""The L1 data-pipe wavefront counts of measurements/h200/cublas_wavefronts/ (Nsight Compute,
absolute counts) per CTA and per K step of cuBLAS's align1 kernels, and per score element of
the project's softmax kernel, with the pipe's busy share and the time per step.

    python scripts/cublas_wavefronts_table.py
"""
from __future__ import annotations

import math
from pathlib import Path

from iosim.measure.ncu import raw_rows

NCU = (Path(__file__).resolve().parent.parent
       / "measurements/h200/cublas_wavefronts/cublas_wavefronts_ncu.csv")
SMS = 132
BK = 32           # the align1 kernels' K step (cutlass_75 ..._128x128 / _64x64: 32)


def blocks(path: Path = NCU) -> list:
    """(shape words, {metric: value}) per profiled kernel."""
    out = []
    for block in path.read_text().split("## ")[1:]:
        name, rest = block.split("\n", 1)
        out += [(name.split(), row) for row in raw_rows(rest)]
    return out


def num(d: dict, key: str) -> float:
    return float(d[key].replace(",", ""))


def main() -> int:
    print(table())
    return 0


def table() -> str:
    """The table main prints."""
    out = [f"{'shape':18s} {'kernel':22s} {'grid':>5s} {'CTAs/SM':>7s} {'us':>7s} "
           f"{'cyc/step':>8s} {'wavefronts':>11s} {'shared':>6s} {'pipe busy':>9s}"]
    for words, d in blocks():
        gx, gy, gz = (int(x) for x in d["Grid Size"].strip("()").split(","))
        ctas = gx * gy * gz
        t_us = num(d, "gpu__time_duration.sum") / 1e3
        cyc = num(d, "sm__cycles_elapsed.avg")
        wf = num(d, "l1tex__data_pipe_lsu_wavefronts.sum")
        shared = num(d, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum")
        busy = num(d, "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed")
        if words[0] == "softmax":
            n = int(words[1])
            elems = 16 * n * n
            out.append(f"{' '.join(words):18s} {'std_softmax':22s} {ctas:5d} {words[2]:>7s} "
                       f"{t_us:7.1f} {'':>8s} {wf / elems:8.3f}/el {shared / elems:6.3f} "
                       f"{busy:8.1f}%")
            continue
        form, n = words[0], int(words[1])
        kernel = d["Kernel Name"].split("gemm_f16_")[-1].split(">")[0].split("(")[0]
        per_sm = "1" if ctas <= SMS else "2" if ctas <= 2 * SMS else "waves"
        if form == "pv":       # K = N: a long K loop, the epilogue a small part
            steps = math.ceil(n / BK)
            out.append(f"{' '.join(words):18s} {kernel:22s} {ctas:5d} {per_sm:>7s} {t_us:7.1f} "
                       f"{cyc / steps:8.0f} {wf / ctas / steps:11.0f} "
                       f"{shared / ctas / steps:6.0f} {busy:8.1f}%")
        else:                  # K = d: d / 32 steps and the epilogue, per CTA
            out.append(f"{' '.join(words):18s} {kernel:22s} {ctas:5d} {per_sm:>7s} {t_us:7.1f} "
                       f"{'':>8s} {wf / ctas:8.0f}/CTA {shared / ctas:6.0f} {busy:8.1f}%")
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
