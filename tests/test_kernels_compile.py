"""The CUDA kernels on the CPU (no GPU, no cupy):

- every CUDA source compiles with nvcc for sm_80 and sm_90, with and without trace mode;
- `iosim.kernels` imports on a machine without cupy;
- the launcher launches each kernel of a Schedule with the schedule's grid, threads and dynamic
  shared memory, and compiles it with the schedule's tiling; and what the .cu source derives
  from that tiling (its thread count, the grid its blockIdx decoding covers, the end of its
  shared-memory carve-out) equals that launch. The launcher runs for real with a stand-in for
  cupy (NumPy arrays, kernels that record their launch instead of running); the .cu's
  compile-time constants are evaluated from its `constexpr` definitions.
"""
from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

from iosim import AttentionProblem, build_schedule
from iosim.kernels.build import CUDA_DIR, SOURCES

NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("trace", [False, True], ids=["timed", "trace"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("source", SOURCES)
def test_cuda_source_compiles(source, arch, trace, tmp_path):
    cmd = [NVCC, f"-arch={arch}", "-std=c++17", "-c", str(CUDA_DIR / source),
           "-o", str(tmp_path / "k.o")] + (["-DIOSIM_TRACE"] if trace else [])
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]


def test_kernels_package_imports_without_cupy():
    # cupy made unimportable: any module-level `import cupy` on the import path fails
    code = ("import sys; sys.modules['cupy'] = None; "
            "import iosim.kernels, iosim.kernels.run, iosim.kernels.trace, iosim.kernels.build; "
            "print(hasattr(iosim.kernels, 'compare_trace'))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "True"


# ---- the .cu's compile-time constants ----------------------------------------------------
def cu_constants(source: str, namespace: str, defines: dict) -> dict:
    """The `constexpr int|u32 NAME = expr` definitions of `namespace` in `source`, evaluated
    with the -D defines (C integer arithmetic; `a ? b : c` conditionals)."""
    text = (CUDA_DIR / source).read_text()
    body = re.search(r"namespace %s \{(.*?)\n\}" % namespace, text, re.S).group(1)
    body = re.sub(r"//[^\n]*", "", body)
    env = dict(defines)
    for stmt in re.findall(r"constexpr\s+(?:int|u32)\s+(.*?);", body, re.S):
        for part in _split_top_level(stmt):
            name, expr = (s.strip() for s in part.split("=", 1))
            py = re.sub(r"\(([^?()]+)\?([^:()]+):([^()]+)\)", r"((\2) if (\1) else (\3))", expr)
            py = re.sub(r"(?<![/])/(?![/])", "//", py)
            try:
                env[name] = eval(py, {}, env)   # noqa: S307 (our own source's arithmetic)
            except Exception:
                pass                            # constants the checks do not need
    return env


def _split_top_level(stmt: str) -> list:
    parts, depth, cur = [], 0, ""
    for ch in stmt:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur]


def test_constant_evaluation_reads_the_sources_arithmetic():
    c = cu_constants("fa2_fwd.cu", "fa2f", {"IOSIM_D": 128, "IOSIM_BQ": 128, "IOSIM_BKV": 64,
                                            "IOSIM_WARPS": 4, "IOSIM_STAGES": 2})
    assert (c["NT"], c["RW"], c["Q_BYTES"], c["KV_BYTES"]) == (128, 32, 32768, 16384)


# What each .cu derives from its tiling (grid decoding, threads, dynamic shared memory), from
# the kernel's own source: the blockIdx lines and the shared-memory carve-out.
def fa2_fwd_needs(p, c):
    # blockIdx = (Q block i, b, h); s_q = smem, then STAGES × (K tile, V tile)
    return ((math.ceil(p.seq_q / c["BQ"]), p.batch, p.heads_q), c["NT"],
            c["Q_BYTES"] + 2 * c["STAGES"] * c["KV_BYTES"])


def fa2_bwd_needs(p, c):
    # blockIdx = (KV block j, b, h); K_j, V_j | STAGES × (Q_i, dO_i) ring | P | dS
    return ((math.ceil(p.seq_kv / c["BKV"]), p.batch, p.heads_q), c["NT"],
            2 * c["KV_BYTES"] + 2 * c["STAGES"] * c["Q_BYTES"] + 2 * c["P_BYTES"])


def fa1_fwd_needs(p, c):
    # blockIdx = (b, h); K_j, V_j | Q_i, O_i | l_i, m_i (fp32)
    return ((p.batch, p.heads_q, 1), c["NT"],
            2 * c["KV_BYTES"] + 2 * c["Q_BYTES"] + 2 * c["BQ"] * 4)


MAIN_KERNELS = {"fa2_fwd": ("fa2_fwd.cu", "fa2f", fa2_fwd_needs),
                "fa2_bwd": ("fa2_bwd.cu", "fa2b", fa2_bwd_needs),
                "fa1_fwd": ("fa1_fwd.cu", "fa1f", fa1_fwd_needs)}


# ---- the launcher, run with a stand-in for cupy ------------------------------------------
def fake_cupy():
    """NumPy in cupy's place: arrays live on the host, matmul is NumPy's."""
    cp = types.ModuleType("cupy")
    for name in ("full", "empty", "zeros", "asarray", "matmul", "float16", "float32", "uint16"):
        setattr(cp, name, getattr(np, name))
    return cp


@pytest.fixture
def launches(monkeypatch):
    """Every launch the launcher makes: (function, defines, grid, block, shared_mem)."""
    import iosim.kernels.run as run

    record = []

    def get_kernel(source, function, defines, dtype, trace, dynamic_smem=0):
        def launch(grid, block, args, shared_mem=0):
            record.append(dict(source=source, function=function, defines=dict(defines),
                               grid=tuple(grid), block=tuple(block), smem=shared_mem,
                               dynamic_smem=dynamic_smem))
        return launch

    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
    monkeypatch.setattr(run, "get_kernel", get_kernel)
    return record


def run_on_fake_device(schedule):
    from iosim.kernels.reference import random_inputs
    from iosim.kernels.run import Launcher, forward_schedule

    p = schedule.problem
    tensors = random_inputs(p, np.random.default_rng(0), with_grad=p.direction != "fwd")
    if p.direction == "bwd":
        Launcher(forward_schedule(p, "fa2")).run(tensors)
    launcher = Launcher(schedule)
    launcher.run(tensors)
    return launcher


CASES = [
    ("fa2", dict(batch=2, heads_q=4, heads_kv=2, seq_q=300, seq_kv=300, head_dim=128, causal=True), {}),
    ("fa2", dict(batch=1, heads_q=2, seq_q=1000, head_dim=64), dict(block_q=64, block_kv=64)),
    ("fa2", dict(batch=1, heads_q=4, heads_kv=2, seq_q=130, seq_kv=300, head_dim=128,
                 causal=True, direction="bwd"), {}),
    ("fa2", dict(batch=2, heads_q=2, seq_q=513, head_dim=64, direction="bwd"),
     dict(bwd_block_q=64, bwd_block_kv=64)),
    ("fa1", dict(batch=2, heads_q=3, seq_q=256, head_dim=128), dict(stages=1)),
    ("fa1", dict(batch=1, heads_q=2, seq_q=300, seq_kv=500, head_dim=64, causal=True),
     dict(stages=1)),
    ("standard", dict(batch=1, heads_q=2, seq_q=130, seq_kv=300, head_dim=64, causal=True), {}),
]

CASE_IDS = [f"{a}-{s.get('direction', 'fwd')}-{n}" for n, (a, s, _) in enumerate(CASES)]


@pytest.mark.parametrize("algorithm,shape,tiles", CASES, ids=CASE_IDS)
def test_launcher_launches_the_schedules_kernels_as_scheduled(launches, algorithm, shape, tiles):
    schedule = build_schedule(AttentionProblem(**shape), "h200", algorithm, **tiles)
    launcher = run_on_fake_device(schedule)
    mine = launches[-(len(schedule.kernels) - len(launcher.untraced)):]
    launched = [k for k in schedule.kernels if k.name not in launcher.untraced]
    assert [r["function"] for r in mine] == [
        {"std_fwd_softmax": "std_softmax"}.get(k.name, k.name) for k in launched]
    for k, r in zip(launched, mine):
        la = k.launch
        assert (r["grid"], r["block"], r["smem"]) == \
            (tuple(la.grid), (la.threads_per_cta,), la.smem_bytes_per_cta), k.name
        assert r["dynamic_smem"] == la.smem_bytes_per_cta, k.name


@pytest.mark.parametrize("algorithm,shape,tiles", CASES, ids=CASE_IDS)
def test_each_cuda_kernel_is_compiled_for_the_schedules_tiling(launches, algorithm, shape, tiles):
    p = AttentionProblem(**shape)
    schedule = build_schedule(p, "h200", algorithm, **tiles)
    run_on_fake_device(schedule)
    checked = 0
    for r in launches:
        if r["function"] not in MAIN_KERNELS or r["function"] not in \
                {k.name for k in schedule.kernels}:
            continue
        t = schedule.tiling["bwd" if "bwd" in r["function"] else "fwd"]
        d = r["defines"]
        assert (d["IOSIM_D"], d["IOSIM_BQ"], d["IOSIM_BKV"], d["IOSIM_WARPS"]) == \
            (p.head_dim, t.block_q, t.block_kv, t.warps)
        source, ns, needs = MAIN_KERNELS[r["function"]]
        grid, threads, smem = needs(p, cu_constants(source, ns, d))
        assert (r["grid"], r["block"], r["smem"]) == (grid, (threads,), smem), r["function"]
        checked += 1
    assert checked >= (1 if algorithm != "standard" else 0)


@pytest.mark.parametrize("seq_kv,passes", [(300, 1), (5000, 2)])
def test_softmax_kernel_gets_the_shared_memory_of_its_rows_or_chunks(launches, seq_kv, passes):
    # softmax.cu: 4 warps, one row each, grid (⌈N_q/4⌉, B, H); each warp stages its row of S
    # (single pass) or a CHUNK-column slice of it (two passes) in shared memory
    from iosim import load_gpu
    gpu = load_gpu("h200").with_(shared_memory_per_block_bytes=36864)
    p = AttentionProblem(batch=2, heads_q=3, seq_q=130, seq_kv=seq_kv, head_dim=64)
    run_on_fake_device(build_schedule(p, gpu, "standard", block_q=64, block_kv=64))
    (r,) = [r for r in launches if r["function"] == "std_softmax"]
    chunk = r["defines"]["IOSIM_CHUNK"]
    row_elems = seq_kv if passes == 1 else chunk
    assert r["grid"] == (math.ceil(130 / 4), 2, 3)
    assert r["block"] == (4 * 32,)
    assert r["smem"] == 4 * row_elems * 2
