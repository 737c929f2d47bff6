"""The three cost ratios of issue 11 (acceptance check 08-core-cost), whole processes, measured
in one run: standard attention against FA-2 at N = 65,536, FA-2 at N = 1,048,576 against
N = 4096, and `compare --seq 32768` (standard, fa1, fa2, fa3) against `run --seq 32768`.

Every command runs as a subprocess `--repeats` times (default 3), the commands and the
interpreters alternated so that the load of a shared machine falls on all alike; the median
wall and the median CPU seconds (user + system of the child and its workers, os.wait4) are
printed, and each ratio of medians. `--python LABEL=PATH` (repeatable): interpreters whose
iosim is measured (e.g. a venv with an older commit installed: before/after in one run);
default: this one. The check compares walls (limits 5x, 3x, 6x); on a machine others load,
the CPU seconds are the steadier figure (`compare` runs its algorithms in 2 forked workers,
so its CPU seconds exceed its wall when a core is free).

    python benchmarks/core_cost.py [--repeats 3] [--python before=/tmp/base/bin/python ...]

Its output is committed in benchmarks/results/core_cost.txt.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from headline_cost import EMPTY_DIR, WHERE, cost  # noqa: E402

COMMANDS = {
    "fa2 65536": ["run", "--gpu", "h100", "--seq", "65536"],
    "standard 65536": ["run", "--gpu", "h100", "--algo", "standard", "--seq", "65536"],
    "fa2 4096": ["run", "--gpu", "h100", "--seq", "4096"],
    "fa2 1048576": ["run", "--gpu", "h100", "--seq", "1048576"],
    "run 32768": ["run", "--gpu", "h100", "--seq", "32768"],
    "compare 32768": ["compare", "--gpu", "h100", "--seq", "32768"],
}
RATIOS = (("standard/fa2 @65536", "standard 65536", "fa2 65536", 5.0),
          ("fa2 1M/4k", "fa2 1048576", "fa2 4096", 3.0),
          ("compare/run @32768", "compare 32768", "run 32768", 6.0))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--python", action="append", default=[], metavar="LABEL=PATH",
                    help="an interpreter to measure (default: this one, labelled 'this')")
    a = ap.parse_args(argv)
    pythons = {lab: os.path.abspath(py) if os.sep in py else py
               for lab, py in (p.split("=", 1) for p in a.python)} or {"this": sys.executable}
    for lab, py in pythons.items():
        where, cached = subprocess.run([py, "-c", WHERE], cwd=EMPTY_DIR, capture_output=True,
                                       text=True, check=True).stdout.split()
        print(f"# {lab}: {py} imports {where} (bytecode cached: {cached})")
    walls = {(lab, c): [] for lab in pythons for c in COMMANDS}
    cpus = {(lab, c): [] for lab in pythons for c in COMMANDS}
    for _ in range(a.repeats):
        for c, args in COMMANDS.items():
            for lab, py in pythons.items():      # alternated: the machine's load falls alike
                w, u = cost(py, args)
                walls[lab, c].append(w)
                cpus[lab, c].append(u)
    print(f"# {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; "
          f"median of {a.repeats}; PYTHONDONTWRITEBYTECODE="
          f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '')}")
    width = max(6, *(len(lab) for lab in pythons))
    print(f"{'command':<16} {'build':<{width}} {'wall s':>7} {'CPU s':>7}   walls")
    med = {}
    for c in COMMANDS:
        for lab in pythons:
            w, u = walls[lab, c], cpus[lab, c]
            med[lab, c] = statistics.median(w), statistics.median(u)
            print(f"{c:<16} {lab:<{width}} {med[lab, c][0]:7.3f} {med[lab, c][1]:7.3f}   "
                  f"{' '.join(f'{x:.2f}' for x in w)}")
    print(f"{'ratio':<22} {'build':<{width}} {'wall':>6} {'CPU':>6}   limit")
    for name, num, den, limit in RATIOS:
        for lab in pythons:
            (wn, un), (wd, ud) = med[lab, num], med[lab, den]
            print(f"{name:<22} {lab:<{width}} {wn / wd:5.2f}x {un / ud:5.2f}x   {limit:g}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
