#!/usr/bin/env python
"""Mutation testing of iosim's numbers: change one thing in the code, run the tests that should
notice, report the mutants they did not notice (survivors).

Mutants are generated from the AST of the target modules, each a small textual change of one
expression, named `file:line:col:kind`:
  op      a binary operator replaced (+ ↔ −, × → +, ÷ → ×, // → ×)
  drop    one operand of + or × dropped (a term or a factor lost: a + b → a)
  const   a numeric constant changed (n → n + 1; a float f → 2f)
  minmax  max ↔ min
  cmp     a comparison loosened or tightened (< ↔ ≤, > ↔ ≥)
  zero    an Alu, Exp or Mma count set to 0 (the op dropped from the totals)
Where they are generated (what "counting" means in each module) is TARGETS below:
  algorithms/*.py   the counts of Alu, Exp and Mma (every sub-expression); with --bytes also
                    the bytes of Load and Store (the element size dropped: one per op)
  analysis/counters.py, bounds.py, roofline.py   every expression in a function body
  sim/memory.py     the servers, the tile LRU and both memory front ends
  algorithms/common.py, machine.py, standard.py (target access)   the partial-sector count, the
                    line-misalignment flag and their DRAM costs
  analysis/validate.py   the budgets, the error definitions, the fit and the summary
Each mutant runs its target's test stages in order (a stage is a pytest command with a
timeout); a mutant is killed when a stage fails or times out, and survives when every stage
passes. Slower stages run only for mutants the fast ones left alive.

The run works on a private copy of the package and tests (the worktree is never modified).

    python scripts/mutate.py                    # every target (see docs/testing.md for times)
    python scripts/mutate.py --target bounds    # one target (names: see --list)
    python scripts/mutate.py --list             # the mutants, without running them
    python scripts/mutate.py --only 'roofline.py:45'   # mutants whose name contains this
    python scripts/mutate.py --json out.json    # also write every result as JSON

Survivors, and why each is acceptable, are listed in docs/testing.md.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the counted arguments of each schedule op: Alu/Exp count, Mma m (its FLOPs are 2·m·n·k; one
# dimension stands for the three), Load/Store bytes
COUNT_ARGS = {"Alu": slice(1, 2), "Exp": slice(1, 2), "Mma": slice(1, 2), "Load": slice(4, 5),
              "Store": slice(4, 5)}
PYTEST = [sys.executable, "-m", "pytest", "-x", "-q", "-rf", "-p", "no:cacheprovider",
          "-o", "addopts=", "--hypothesis-profile=mutation"]

COUNT_TESTS = ["tests/test_counts_alu.py", "tests/test_counts_fa1.py", "tests/test_counts_fa2.py",
               "tests/test_counts_fa3.py", "tests/test_counts_square.py",
               "tests/test_counts_standard.py"]
VALIDATE_FAST = ["tests/test_validate.py", "tests/test_validate_budgets.py", "-m", "not slow",
                 "-k", "not dataset and not within_budget and not event_time "
                       "and not every_project_row and not without_fitted"]


@dataclass(frozen=True)
class Target:
    name: str
    files: tuple              # paths relative to the repository
    where: str                # "count_calls" | "functions" | "functions:<f,g>" | "classes:<A,B>" | "validate"
    stages: tuple             # ((pytest args...), timeout_s), in order


TARGETS = (
    Target("algorithms", ("iosim/algorithms/fa1.py", "iosim/algorithms/fa2.py",
                          "iosim/algorithms/fa3.py", "iosim/algorithms/square.py",
                          "iosim/algorithms/standard.py"), "count_calls",
           ((tuple(COUNT_TESTS), 120),
            (("tests/test_kernels_trace.py", "tests/test_kernels_compile.py", "-k",
              "not compiles"), 120))),
    Target("counters", ("iosim/analysis/counters.py",), "functions",
           ((("tests/test_counters.py", *COUNT_TESTS), 120),
            (("tests/test_roofline.py", "tests/test_api.py"), 180))),
    Target("bounds", ("iosim/analysis/bounds.py",), "functions",
           ((("tests/test_bounds.py", "tests/test_bounds_formulas.py"), 60),
            (("tests/test_teach_sections.py",), 180))),
    Target("roofline", ("iosim/analysis/roofline.py",), "functions",
           ((("tests/test_roofline.py",), 60),)),
    Target("memory", ("iosim/sim/memory.py",), "classes:Server,TileLru,ExactMemory,ExpectedMemory",
           ((("tests/test_sim_memory.py", "tests/test_l2_dirty_limit.py", "tests/test_sim_units.py",
              "tests/test_sim_rates.py", "tests/test_sim_protocol.py",
              "tests/test_sim_mma.py"), 120),
            (("tests/test_sim_modes.py", "tests/test_sim_plausibility.py"), 300))),
    Target("dram_mix", ("iosim/sim/memory.py",), "classes:MixedDramServer",
           ((("tests/test_dram_mix.py", "tests/test_sim_memory.py"), 120),)),
    Target("compute", ("iosim/sim/compute.py",), "classes:SmUnits,SharedServer",
           ((("tests/test_shared_units.py", "tests/test_sim_rates.py", "tests/test_sim_units.py"), 120),)),
    Target("lockstep", ("iosim/sim/lockstep.py", "iosim/sim/wait_cohorts.py"), "functions",
           ((("tests/test_sim_lockstep.py", "tests/test_sim_wait_cohorts.py"), 120),)),
    Target("l1", ("iosim/sim/l1.py",), "functions",
           ((("tests/test_l1_units.py", "tests/test_l1.py"), 120),)),
    Target("access", ("iosim/algorithms/common.py", "iosim/machine.py", "iosim/algorithms/standard.py"),
           "functions:partial_sector_writes,partial_sector_write_cost_bytes,"
           "line_misaligned_dram_factor,dram_access_penalty_s,line_misaligned",
           ((("tests/test_partial_sectors.py", "-k", "not committed_probe"), 180),)),
    Target("validate", ("iosim/analysis/validate.py",), "validate",
           ((tuple(VALIDATE_FAST), 120),)),
)
VALIDATE_FUNCS = {"Row", "is_train", "fit_efficiency", "summarize", "check_budgets"}

# The hand audit's mutations (issue 17), each (file, text, replacement); the text must occur
# once. Run by the target "issue" against every test file written to kill them.
NAMED = (
    ("iosim/algorithms/fa1.py", 'Alu("update O", 3 * br * d)', 'Alu("update O", br * d)'),
    ("iosim/algorithms/fa2.py", 'body.append(Alu("mask", br * bc))\n        body += [Exp("P=exp(S-LSE)"',
     'pass\n        body += [Exp("P=exp(S-LSE)"'),
    ("iosim/analysis/bounds.py", "n2d2_over_m_bytes=int(N * N * d * d / M * eb * n_heads)",
     "n2d2_over_m_bytes=int(N * N * d / M * eb * n_heads)"),
    ("iosim/analysis/bounds.py", "sy = int(saha_ye_elements(N, d, M) * eb * n_heads)",
     "sy = int(saha_ye_elements(N, d, M) * n_heads)"),
    ("iosim/analysis/roofline.py", "roofline_time_s=times[bound]",
     "roofline_time_s=sum(times.values())"),
    ("iosim/analysis/roofline.py", '"exp units": exp_count / gpu.exp_per_s',
     '"exp units": exp_count / (gpu.exp_per_s / 2)'),
    ("iosim/hardware.py", "return self.exp_per_clock_per_sm * self.sm_count * self.clock_hz",
     "return self.exp_per_clock_per_sm * self.sm_count * self.clock_hz / 2"),
    ("iosim/analysis/validate.py", '"dram_bytes_max_abs_err": 0.10', '"dram_bytes_max_abs_err": 0.50'),
    ("iosim/analysis/validate.py", '"l2_to_sm_bytes_max_abs_err": 0.02',
     '"l2_to_sm_bytes_max_abs_err": 0.20'),
    ("iosim/kernels/trace.py", "if pg > pe:", "if False:"),
    ("iosim/machine.py", "exp_per_s=gpu.exp_per_clock_per_sm * gpu.clock_hz",
     "exp_per_s=2 * gpu.exp_per_clock_per_sm * gpu.clock_hz"),
    ("iosim/machine.py", "alu_ops_per_s=gpu.alu_ops_per_s / gpu.sm_count",
     "alu_ops_per_s=2 * gpu.alu_ops_per_s / gpu.sm_count"),
)
ISSUE_TESTS = ("tests/test_counts_alu.py", "tests/test_bounds_formulas.py", "tests/test_roofline.py",
               "tests/test_trace_late_load.py", "tests/test_sim_rates.py",
               "tests/test_validate_budgets.py", "-k", "not every_project_row and not without_fitted")
TARGETS = TARGETS + (Target("issue", tuple(sorted({f for f, _, _ in NAMED})), "named",
                            ((ISSUE_TESTS, 180),)),)


OPTIONS = {"bytes": False}   # --bytes: also the Load/Store byte mutants of the algorithms


@dataclass(frozen=True)
class Mutant:
    name: str          # file:line:col:kind
    target: str
    path: str
    start: int         # character offsets into the file
    end: int
    new: str
    old: str


# ---- generation ---------------------------------------------------------------------------
OP_SWAP = {ast.Add: (ast.Sub, "-"), ast.Sub: (ast.Add, "+"), ast.Mult: (ast.Add, "+"),
           ast.Div: (ast.Mult, "*"), ast.FloorDiv: (ast.Mult, "*")}
CMP_SWAP = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">"}


def _offsets(text: str) -> list:
    out, pos = [], 0
    for line in text.splitlines(keepends=True):
        out.append(pos)
        pos += len(line)
    return out


def _span(node, lines) -> tuple:
    return (lines[node.lineno - 1] + node.col_offset, lines[node.end_lineno - 1] + node.end_col_offset)


def _regions(tree: ast.AST, where: str) -> list:
    """(node, descend) pairs: the AST nodes that may be mutated, and whether their
    sub-expressions may be too."""
    if where == "count_calls":
        out = []
        for node in ast.walk(tree):
            name = getattr(node, "func", None) and getattr(node.func, "id", None)
            if isinstance(node, ast.Call) and name in COUNT_ARGS:
                # bytes of loads and stores (rows · cols · element size, repeated dozens of
                # times): the outermost operation only; work counts: every sub-expression
                if name in ("Load", "Store") and not OPTIONS["bytes"]:
                    continue
                out += [(a, name not in ("Load", "Store")) for a in node.args[COUNT_ARGS[name]]]
        return out
    if where == "functions":
        return [(n, True) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    if where.startswith("functions:"):
        names = set(where.split(":", 1)[1].split(","))
        return [(n, True) for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    if where.startswith("classes:"):
        names = set(where.split(":", 1)[1].split(","))
        return [(n, True) for n in tree.body if isinstance(n, ast.ClassDef) and n.name in names]
    if where == "validate":
        out = []
        for n in tree.body:
            if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "BUDGETS" for t in n.targets):
                out.append((n.value, True))
            elif isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in VALIDATE_FUNCS:
                out.append((n, True))
        return out
    raise ValueError(where)


def _skip(node, parents) -> bool:
    """Docstrings, f-strings and message text are not numbers anyone reads as a result."""
    return any(isinstance(p, (ast.JoinedStr, ast.FormattedValue)) for p in parents)


def generate(target: Target) -> list:
    if target.where == "named":
        return named_mutants(target)
    mutants = []
    for rel in target.files:
        text = (ROOT / rel).read_text()
        tree = ast.parse(text)
        lines = _offsets(text)
        seen = set()
        for region, descend in _regions(tree, target.where):
            stack = [(region, ())]
            while stack:
                node, parents = stack.pop()
                if descend:
                    for child in ast.iter_child_nodes(node):
                        stack.append((child, parents + (node,)))
                if _skip(node, parents) or id(node) in seen:
                    continue
                seen.add(id(node))
                if not descend and region is node:     # bytes: the element size dropped
                    muts = _drop_last_factor(node, text, lines)
                else:
                    muts = _mutations(node, text, lines, parents)
                if region is node and descend and target.where == "count_calls":
                    start, end = _span(node, lines)    # the op's whole count set to zero
                    muts = [*muts, ("zero", start, end, "0")]
                for kind, start, end, new in muts:
                    old = text[start:end]
                    if new == old:
                        continue
                    name = f"{rel}:{node.lineno}:{node.col_offset}:{kind}"
                    mutants.append(Mutant(name, target.name, rel, start, end, new, old))
    unique = {}
    for m in mutants:
        unique.setdefault((m.path, m.start, m.end, m.new), m)
    return sorted(unique.values(), key=lambda m: (m.path, m.start, m.name))


def named_mutants(target: Target) -> list:
    out = []
    for n, (rel, old, new) in enumerate(NAMED, 1):
        text = (ROOT / rel).read_text()
        if text.count(old) != 1:
            raise SystemExit(f"error: named mutant {n}: {old!r} occurs {text.count(old)} times "
                             f"in {rel} (the code changed: update NAMED)")
        start = text.index(old)
        line = text.count("\n", 0, start) + 1
        out.append(Mutant(f"{rel}:{line}:named{n}", target.name, rel, start, start + len(old),
                          new, old))
    return out


def _drop_last_factor(node, text, lines):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        start, end = _span(node, lines)
        yield "drop", start, end, f"({text[slice(*_span(node.left, lines))]})"


def _mutations(node, text, lines, parents):
    if isinstance(node, ast.BinOp) and type(node.op) in OP_SWAP:
        start, end = _span(node, lines)
        left = text[slice(*_span(node.left, lines))]
        right = text[slice(*_span(node.right, lines))]
        _, sym = OP_SWAP[type(node.op)]
        yield "op", start, end, f"({left} {sym} {right})"
        if isinstance(node.op, (ast.Add, ast.Mult)):
            yield "drop", start, end, f"({left})"
            yield "drop", start, end, f"({right})"
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float) \
            and not isinstance(node.value, bool):
        if parents and isinstance(parents[-1], ast.Expr):
            return
        start, end = _span(node, lines)
        v = node.value
        yield "const", start, end, repr(v + 1 if isinstance(v, int) else v * 2)
    elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("max", "min"):
        start, end = _span(node.func, lines)
        yield "minmax", start, end, "min" if node.func.id == "max" else "max"
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in CMP_SWAP:
        left_end = _span(node.left, lines)[1]
        right_start = _span(node.comparators[0], lines)[0]
        seg = text[left_end:right_start]
        sym = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}[type(node.ops[0])]
        at = seg.find(sym)
        if at >= 0:
            yield "cmp", left_end + at, left_end + at + len(sym), CMP_SWAP[type(node.ops[0])]


# ---- running ------------------------------------------------------------------------------
def make_copy() -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="iosim-mutate-"))
    shutil.copytree(ROOT / "iosim", tmp / "iosim",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests", tmp / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp / "pyproject.toml")
    (tmp / "measurements").symlink_to(ROOT / "measurements")   # read-only data some tests compare with
    return tmp


def run_stage(copy: Path, args: tuple, timeout_s: int) -> tuple:
    """Run pytest on the copy: in a forked child of this process where the OS allows (the
    third-party imports are paid once, in the parent; the child imports iosim and the tests
    afresh, mutated), else in a subprocess. Returns (status, first failure line)."""
    if not hasattr(os, "fork"):
        return _run_stage_subprocess(copy, args, timeout_s)
    out_path = copy / ".stage-output"
    pid = os.fork()
    if pid == 0:                                   # the child: pytest.main, then exit
        code = 3
        try:
            fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            import pytest
            code = pytest.main(PYTEST[3:] + list(args))
        finally:
            sys.stdout.flush()
            os._exit(int(code))
    deadline = time.time() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.time() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout", ""
        time.sleep(0.05)
    code = os.waitstatus_to_exitcode(status)
    text = out_path.read_text(errors="replace") if out_path.exists() else ""
    return _outcome(code, text)


def _run_stage_subprocess(copy: Path, args: tuple, timeout_s: int) -> tuple:
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        res = subprocess.run(PYTEST + list(args), cwd=copy, env=env, capture_output=True,
                             text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "timeout", ""
    return _outcome(res.returncode, res.stdout)


def _outcome(code: int, text: str) -> tuple:
    if code == 0:
        return "passed", ""
    last = [line for line in text.splitlines() if line.startswith(("FAILED", "ERROR"))]
    return "failed", (last or text.strip().splitlines()[-1:] or [""])[0]


def prepare_parent(copy: Path) -> None:
    """The forked children run pytest in the copy: import the third-party packages once here
    (never iosim: each child must import the mutated copy)."""
    os.chdir(copy)
    sys.path.insert(0, str(copy))
    os.environ.update(PYTHONDONTWRITEBYTECODE="1", IOSIM_VALIDATE_WORKERS="1")
    sys.dont_write_bytecode = True
    import hypothesis, numpy, pandas, pydantic, pytest, simpy, yaml, click  # noqa: F401,E401
    assert not any(m == "iosim" or m.startswith("iosim.") for m in sys.modules)


# the tests most likely to kill a mutant of this algorithm, run before the target's stages
FIRST_STAGE = {
    "iosim/algorithms/fa1.py": ("tests/test_counts_alu.py", "-k", "fa1"),
    "iosim/algorithms/fa2.py": ("tests/test_counts_fa2.py", "tests/test_counts_alu.py", "-k",
                                "fa2 or totals"),
    "iosim/algorithms/square.py": ("tests/test_counts_alu.py", "-k", "square"),
    "iosim/algorithms/standard.py": ("tests/test_counts_alu.py", "-k", "standard"),
}


def run_mutant(copy: Path, m: Mutant, target: Target) -> dict:
    path = copy / m.path
    original = path.read_text()
    mutated = original[:m.start] + m.new + original[m.end:]
    try:
        compile(mutated, m.path, "exec")
    except SyntaxError:
        return {"status": "invalid", "by": ""}
    path.write_text(mutated)
    try:
        first = ((FIRST_STAGE[m.path], 60),) if m.path in FIRST_STAGE else ()
        for args, timeout_s in first + target.stages:
            status, by = run_stage(copy, args, timeout_s)
            if status != "passed":
                return {"status": "killed", "by": by or status}
        return {"status": "survived", "by": ""}
    finally:
        path.write_text(original)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", action="append", help="run only these targets")
    ap.add_argument("--only", action="append",
                    help="run only mutants whose name contains this text (repeatable)")
    ap.add_argument("--kinds", help="run only these kinds (comma-separated: op,drop,const,...)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--json", help="write every result to this file")
    ap.add_argument("--skip-baseline", action="store_true",
                    help="do not first check that the targets' tests pass unmutated")
    ap.add_argument("--bytes", action="store_true",
                    help="also mutate the bytes of every Load/Store in the algorithms (~200 more)")
    args = ap.parse_args(argv)
    OPTIONS["bytes"] = args.bytes
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # clean up the copy when stopped
    targets = [t for t in TARGETS if not args.target or t.name in args.target]
    kinds = set(args.kinds.split(",")) if args.kinds else None
    todo = [(t, m) for t in targets for m in generate(t)
            if (not args.only or any(o in m.name for o in args.only))
            and (kinds is None or m.name.rsplit(":", 1)[1] in kinds)]
    if args.list:
        for _, m in todo:
            print(f"{m.name}: {m.old!r} -> {m.new!r}")
        print(f"{len(todo)} mutants")
        return 0
    copy = make_copy()
    prepare_parent(copy)
    results, t0 = [], time.time()
    try:
        for target in (() if args.skip_baseline else targets):   # unmutated tests pass first
            for stage_args, timeout_s in target.stages:
                status, by = run_stage(copy, stage_args, timeout_s)
                if status != "passed":
                    print(f"error: {target.name}'s tests fail without a mutant: {by or status}",
                          file=sys.stderr)
                    return 2
        for n, (target, m) in enumerate(todo, 1):
            r = {**asdict(m), **run_mutant(copy, m, target)}
            results.append(r)
            mark = {"killed": ".", "survived": "S", "invalid": "i"}[r["status"]]
            by = f"  ({r['by']})" if r["by"] else ""
            print(f"[{n}/{len(todo)} {time.time() - t0:5.0f}s] {mark} {m.name}{by}", flush=True)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    survivors = [r for r in results if r["status"] == "survived"]
    counts = {s: sum(r["status"] == s for r in results) for s in ("killed", "survived", "invalid")}
    print(f"\n{len(results)} mutants: {counts['killed']} killed, {counts['survived']} survived, "
          f"{counts['invalid']} invalid ({time.time() - t0:.0f} s)")
    for r in survivors:
        print(f"SURVIVED {r['name']}: {r['old']!r} -> {r['new']!r}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
