"""The fragment-layout store probe (measurements/h200/store_layout/store_layout_h200.json) read
per SM: for each row width, storing threads and bytes, the chip's rate (all bytes over the
%globaltimer span until the last CTA's stores are acknowledged) divided by the SMs that stored,
against how many warps stored on each SM at once (1 CTA per SM up to 132 CTAs, 2 beyond).
It says whether the fragment store's limit is the chip's or each SM's.

    python scripts/store_layout_per_sm.py > benchmarks/results/store_layout_per_sm.txt
"""
from __future__ import annotations

import json
from pathlib import Path

PROBE = Path(__file__).resolve().parents[1] / "measurements/h200/store_layout/store_layout_h200.json"
SMS = 132


def main() -> None:
    rows = json.loads(PROBE.read_text())["rows"]
    print("fragment layout: GB/s per storing SM (chip TB/s) by CTAs; warps storing per SM at once")
    print(f"{'row B':>5} {'thr':>4} {'KB':>3} | " + " | ".join(f"{c:>3} CTAs" + " " * 10 for c in (33, 66, 132, 264)))
    for rb in (128, 256):
        for th in (128, 256):
            for nbytes in (16384, 32768, 65536):
                cells = []
                for ctas in (33, 66, 132, 264):
                    (r,) = [r for r in rows if (r["layout"], r["row_bytes"], r["threads"],
                                                r["store_bytes"], r["ctas"]) ==
                            ("fragment", rb, th, nbytes, ctas)]
                    sms = min(ctas, SMS)
                    warps = th // 32 * (ctas // sms)
                    cells.append(f"{r['chip_bytes_per_s'] / sms / 1e9:5.1f} ({r['chip_bytes_per_s'] / 1e12:4.2f}) w{warps:<2}")
                print(f"{rb:>5} {th:>4} {nbytes // 1024:>3} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
