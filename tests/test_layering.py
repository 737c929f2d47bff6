"""The import graph of iosim follows the layering rules of docs/architecture.md: a module
imports only from its own layer or the layers below it, and the GPU-side packages never
import the simulator's or the reports' dependencies. The graph is read from the source
(every `import` and `from ... import`, lazy ones inside functions included)."""
import ast
from pathlib import Path

import iosim

ROOT = Path(iosim.__file__).parent

# lowest first; a module may import its own layer and any layer listed before it
LAYERS = [
    {"errors", "units", "paths", "__version__", "progress", "records", "textfiles",
     "parallel", "gcpause"},
    {"problem", "hardware", "hardware_schema", "scenarios", "schedule", "machine", "formats",
     "limits", "l1_curve"},
    {"algorithms", "options", "ablation"},
    {"sim", "kernels"},
    {"analysis", "measure", "clock"},
    {"report", "teach", "api", "plot", "sweep"},
    {"cli", "__main__"},
]
# packages that run on the GPU machine, which has no simpy, plotly or pydantic
GPU_SIDE = {"kernels", "measure"}
GPU_FORBIDDEN = {"simpy", "plotly"}

# imports that break a rule today, each with what removes it; an exception that no longer
# occurs must be deleted from here (test_known_exceptions_still_exist)
KNOWN_EXCEPTIONS = {
    # file formats and limits name the algorithms and tiling keys a file or a problem may use;
    # both import them lazily, inside the function that checks (a registry of names in a
    # lower layer would remove these)
    ("formats", "algorithms"), ("formats", "options"), ("limits", "algorithms"),
    # Analysis._repr_html_ renders the run table of report.text in a notebook (lazy)
    ("analysis", "report"),
    # `iosim capture --timeline` writes the captured trace with report.trace_events, which is
    # plain JSON (no plotly), so the GPU-side rule below still holds
    ("kernels", "report"),
}


def _layer_of(name: str) -> int:
    for i, members in enumerate(LAYERS):
        if name in members:
            return i
    raise AssertionError(f"iosim.{name} is in no layer of tests/test_layering.py")


def _unit(module: str) -> str:
    """iosim.sim.fast → sim; iosim → the package root (only __version__ comes from it)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__version__"


def _imports():
    """(importing unit, imported module) for every import in the package."""
    out = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        me = ".".join(parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[:len(package) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target == "iosim" and any(a.name != "__version__" for a in node.names):
                    target = "iosim.<root>"
                out.append((me, target))
            elif isinstance(node, ast.Import):
                out.extend((me, a.name) for a in node.names)
    return out


def _violations():
    bad = set()
    for me, target in _imports():
        if not target.startswith("iosim") or target == "iosim.<root>":
            continue
        a, b = _unit(me), _unit(target)
        if a != b and _layer_of(b) > _layer_of(a):
            bad.add((a, b))
    return bad


def test_every_module_is_in_a_layer():
    units = {_unit(me) for me, _t in _imports()}
    for u in units:
        _layer_of(u)


def test_imports_go_down_the_layers():
    assert _violations() - KNOWN_EXCEPTIONS == set()


def test_known_exceptions_still_exist():
    assert KNOWN_EXCEPTIONS - _violations() == set(), "remove the fixed ones from the list"


def test_gpu_side_packages_never_import_simpy_or_plotly():
    offenders = {(me, t) for me, t in _imports()
                 if _unit(me) in GPU_SIDE and t.split(".")[0] in GPU_FORBIDDEN}
    assert offenders == set()


def test_gpu_side_packages_import_nothing_that_imports_simpy():
    """kernels and measure may import the layers below them, but not sim (SimPy)."""
    offenders = {(me, t) for me, t in _imports()
                 if _unit(me) in GPU_SIDE and t.startswith("iosim.") and _unit(t) == "sim"}
    assert offenders == set()


def test_the_package_root_exports_lazily():
    """iosim/__init__.py imports no subpackage at import time (GPU-side modules load on a
    machine without the core's dependencies)."""
    tree = ast.parse((ROOT / "__init__.py").read_text(encoding="utf-8"))
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert all(getattr(n, "module", "") == "importlib" for n in top)
