"""Wall and CPU seconds of the headline (`iosim run --gpu h100 --seq 32768`), of
`iosim compare --gpu h100 --seq 32768` and of `iosim run --gpu h100 --seq 4096`, whole processes.

Issue 11 asks that the headline stay under 0.4 s on 2 cores. Each command runs as a subprocess
`--repeats` times (default 5); the median wall (perf_counter around the process) and the median
CPU seconds (user + system of the child, from os.wait4) are printed. With `--python LABEL=PATH`
(repeatable) the same commands run under other interpreters, e.g. a venv with an older commit
installed, alternated so that the load of a shared machine falls on every one alike: the
before/after figures of one run.

Bytecode: an editable checkout run with PYTHONDONTWRITEBYTECODE=1 (this project's machine sets
it) compiles every iosim module at every start (~0.06 s of the headline); a regular install
(`pip install .`) has its .pyc files written at install. `--compile` writes them for each
interpreter's iosim first (compileall), so that a checkout is measured as an install runs; the
header says, per interpreter, whether its iosim has cached bytecode.

    python benchmarks/headline_cost.py [--repeats 5] [--compile] [--python before=/tmp/base/bin/python ...]

Its output is committed in benchmarks/results/headline_cost.txt.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

EMPTY_DIR = tempfile.mkdtemp(prefix="headline-cost-")

COMMANDS = {
    "run --seq 32768 (headline)": ["run", "--gpu", "h100", "--seq", "32768"],
    "compare --seq 32768": ["compare", "--gpu", "h100", "--seq", "32768"],
    "run --seq 4096": ["run", "--gpu", "h100", "--seq", "4096"],
}


# the interpreter's iosim package, and whether every module of it has fresh cached bytecode
WHERE = """
import importlib.util, os, pathlib, iosim
root = pathlib.Path(iosim.__file__).parent
def fresh(src):
    pyc = importlib.util.cache_from_source(str(src))
    return os.path.exists(pyc) and os.path.getmtime(pyc) >= os.path.getmtime(src)
print(iosim.__file__, all(fresh(p) for p in root.rglob("*.py")))
"""
COMPILE = ("import compileall, pathlib, iosim; "
           "compileall.compile_dir(str(pathlib.Path(iosim.__file__).parent), quiet=1)")


def cost(python: str, args: list) -> tuple:
    """(wall seconds, CPU seconds user + system) of one `python -m iosim args` process, run
    from an empty folder (`-m` puts the working directory first on sys.path: from a checkout
    it would import that checkout's iosim whatever the interpreter has installed)."""
    env = {**os.environ, "TQDM_DISABLE": "1"}
    t0 = time.perf_counter()
    proc = subprocess.Popen([python, "-m", "iosim", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, cwd=EMPTY_DIR)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"error: {python} -m iosim {' '.join(args)} exited {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--python", action="append", default=[], metavar="LABEL=PATH",
                    help="another interpreter to measure (default: this one, labelled 'this')")
    ap.add_argument("--compile", action="store_true",
                    help="write each interpreter's iosim bytecode first (compileall)")
    a = ap.parse_args(argv)
    pythons = {lab: os.path.abspath(py) if os.sep in py else py     # the children run elsewhere
               for lab, py in (p.split("=", 1) for p in a.python)} or {"this": sys.executable}
    walls = {(lab, c): [] for lab in pythons for c in COMMANDS}
    cpus = {(lab, c): [] for lab in pythons for c in COMMANDS}
    for lab, py in pythons.items():
        if a.compile:
            subprocess.run([py, "-c", COMPILE], cwd=EMPTY_DIR, check=True)
        where, cached = subprocess.run([py, "-c", WHERE], cwd=EMPTY_DIR, capture_output=True,
                                       text=True, check=True).stdout.split()
        print(f"# {lab}: {py} imports {where} (bytecode cached: {cached})")
    for _ in range(a.repeats):
        for c, args in COMMANDS.items():
            for lab, py in pythons.items():      # alternated: the machine's load falls alike
                w, u = cost(py, args)
                walls[lab, c].append(w)
                cpus[lab, c].append(u)
    print(f"# {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; "
          f"median of {a.repeats}; PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')}")
    width = max(8, *(len(lab) for lab in pythons))
    print(f"{'command':<28} {'build':<{width}} {'wall s':>7} {'CPU s':>7}   walls")
    for c in COMMANDS:
        for lab in pythons:
            w, u = walls[lab, c], cpus[lab, c]
            print(f"{c:<28} {lab:<{width}} {statistics.median(w):7.3f} {statistics.median(u):7.3f}"
                  f"   {' '.join(f'{x:.2f}' for x in w)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
