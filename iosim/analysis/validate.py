"""`iosim validate`: predict every measured configuration and report the error. One model:
the time scored here is the time `iosim run` prints (no per-group factor is fitted).

Datasets (`--dataset`):
- h200: every pair in iosim/data/validation/ of a sweep (`sweep.yaml`, `sweep_<topic>.yaml`:
  the configurations, each with its problem, implementation and the iosim schedule that
  describes it) and its measurements (`measured_h200.csv`, `measured_h200_<topic>.csv`: per
  configuration id, the kernels' time and Nsight Compute's byte counters), produced on the H200
  (iosim/data/validation/README.md);
- published: iosim/data/validation/published.csv, figures other groups published (paper,
  figure, panel per row), predicted on the config of the GPU they name.

Protocols: bytes are predicted the way Nsight Compute measures them (l2_protocol="ncu": every
kernel starts with an invalidated L2; dirty lines left in L2 at a kernel's end are counted by
no kernel), times the way CUDA events measure them (time_protocol="warm": one L2 across the
configuration's kernels). See docs/validation.md.

Held-out rows: odd positions of sweep.yaml, and rows a topic sweep marks `held_out: true`
(else its odd positions). They were never used to choose a model parameter; errors are
reported for all rows and for the held-out rows separately. Bytes are never fitted; the L2's
effective capacity (iosim.sim.memory.L2_EFFECTIVE_FRACTION) was chosen once, from the L2 probes
in iosim/data/validation/l2_probe.csv and the first dataset's training rows' DRAM bytes.
"""
from __future__ import annotations

import csv
import json
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import click

from ..errors import IosimError
from ..formats import load_kernel_names
from ..formats import load_measurements as load_measurement_rows
from ..formats import load_sweep
from ..paths import VALIDATION_DIR
from ..problem import PROBLEM_KEYS


BUDGETS = {  # issue 12's error budgets
    "project": {"l2_to_sm_bytes_max_abs_err": 0.01, "dram_bytes_max_abs_err": 0.05,
                "time_mape": 0.06, "time_max_abs_err": 0.15},
    "external": {"time_mape": 0.08},
    "published": {"time_mape": 0.12, "time_max_abs_err": 0.25},
}
DATASETS = ("h200", "published")
TILING_COLUMNS = ("block_q", "block_kv", "stages", "warps")
CUDNN_BLOCK_Q = 128    # cuDNN's sm90 flash forward's Q tile (implementation_tiling)


@dataclass
class Row:
    id: str
    impl: str
    algorithm: str
    direction: str
    train: bool
    measured_time_s: float          # GPU time of the kernels (see _gpu_time_s)
    event_time_s: float             # CUDA-event time around the whole call
    predicted_time_s: float
    measured_l2_to_sm_bytes: float | None
    predicted_l2_to_sm_bytes: float
    measured_dram_bytes: float | None
    predicted_dram_bytes: float
    dataset: str = "sweep"          # the sweep's topic ("sweep" for sweep.yaml)
    breakdown: dict | None = None   # predicted seconds by mechanism (sim.breakdown)
    # the DRAM bytes by direction (ncu's dram__bytes_read / _write; the simulator's reads and
    # write-backs under the same protocol), where both are known
    measured_dram_read_bytes: float | None = None
    measured_dram_write_bytes: float | None = None
    predicted_dram_read_bytes: float | None = None
    predicted_dram_write_bytes: float | None = None
    tiling: dict | None = None      # what the schedule was told the kernels launched (row_tiling)

    @property
    def group(self) -> tuple:
        return (self.impl, self.algorithm, self.direction)

    @property
    def time_err(self) -> float:
        return self.predicted_time_s / self.measured_time_s - 1

    @property
    def l2_err(self) -> float | None:
        return _rel_err(self.predicted_l2_to_sm_bytes, self.measured_l2_to_sm_bytes)

    @property
    def dram_err(self) -> float | None:
        return _rel_err(self.predicted_dram_bytes, self.measured_dram_bytes)

    @property
    def dram_read_err(self) -> float | None:
        return _rel_err(self.predicted_dram_read_bytes, self.measured_dram_read_bytes)

    @property
    def dram_write_err(self) -> float | None:
        return _rel_err(self.predicted_dram_write_bytes, self.measured_dram_write_bytes)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d.update(time_err=self.time_err, l2_err=self.l2_err, dram_err=self.dram_err,
                 dram_read_err=self.dram_read_err, dram_write_err=self.dram_write_err)
        return d


def _rel_err(predicted: float | None, measured: float | None) -> float | None:
    return predicted / measured - 1 if predicted is not None and measured else None


def _float(v):
    return float(v) if v not in (None, "", "nan") else None


def load_measurements(path: Path) -> dict:
    if not path.is_file():
        raise IosimError(f"no measurements at {path}; run the sweep on a GPU first "
                         f"(iosim/data/validation/README.md)")
    return load_measurement_rows(path)      # every row typed (formats.MeasurementRow)


def is_train(position: int) -> bool:
    """The held-out split: even positions of the sweep are training rows (the rows model
    choices were ever looked at on), odd ones are held out."""
    return position % 2 == 0


def _train(position: int, cfg: dict) -> bool:
    if "held_out" in cfg:
        return not cfg["held_out"]
    return is_train(position)


def _predict_one(job: tuple) -> dict:
    """Simulate one configuration: warm time, ncu-protocol bytes (runs in a worker process)."""
    from ..algorithms import build_schedule
    from ..problem import AttentionProblem
    from ..clock import sustained_simulation
    from ..machine import time_breakdown
    problem_kw, algorithm, gpu, *rest = job
    tiling = rest[0] if rest else {}
    schedule = build_schedule(AttentionProblem(**problem_kw), gpu, algorithm, **tiling)
    r, at = sustained_simulation(schedule, gpu, l2_protocol="ncu", time_protocol="warm")
    gpu = at
    return {"time_s": r.time_s, "l2_to_sm_bytes": r.l2_to_sm_bytes,
            "dram_bytes": r.dram_read_bytes + r.dram_write_bytes,
            "dram_read_bytes": r.dram_read_bytes, "dram_write_bytes": r.dram_write_bytes,
            "kernels": [(k.name, k.time_s) for k in r.kernels],
            "breakdown": time_breakdown(schedule, gpu, r), "clock_hz": at.clock_hz}


def implementation_tiling(cfg: dict, gpu) -> dict:
    """The tile configuration an external implementation launches, where it differs from the
    schedule's default: torch's flash back end (FlashAttention-2's kernels) forward picks
    128×128 / 4 warps at d ≤ 64, 128×64 / 4 warps at d ≤ 128 on sm90, and at d = 256
    128×64 / 8 warps when an SM's shared memory is below 4·d·(64 + 2·64) bytes (A100), else
    64×64 / 4 warps (H100/H200) (flash-attention, csrc/flash_attn/src/
    flash_fwd_launch_template.h, run_mha_fwd_hdim*). The backward keeps the schedule's tiles
    (flash_bwd_launch_template.h: 64×128 / 8 warps at d 128, 128×128 / 8 warps at d 64 on an
    SM with ≥ 144 KB of shared memory per block, as the schedule picks). Both directions are
    described as torch's flash back end (`kernel="torch-flash"`, iosim/algorithms/fa2.py):
    flash-attention's kernels, whose KV (forward) and Q (backward) loops run from the last
    block to the first and whose dQaccum atomics are coalesced, and in the backward the two
    copies torch makes of O and dO (`.contiguous()`) before them. The cuDNN rows are FA-3-like
    kernels that stage O through shared memory (`kernel="cudnn"`) on 128-row Q tiles at every
    head dimension: its kernels' names (Nsight Compute) carry the same tile shape at d 64, 128
    and 256, `cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x<d>_
    4x1x1`, and at d 128 / 256 the schedule's 128-row tiles give their L2→SM bytes within 0.1% /
    1.8% (FA-3's own kernel takes 192 rows at d 64)."""
    if cfg.get("impl") == "torch_cudnn" and cfg.get("algorithm") == "fa3":
        return {"kernel": "cudnn", "block_q": CUDNN_BLOCK_Q}     # fa3.py, KERNELS
    if cfg.get("impl") != "torch_flash":
        return {}
    torch_flash = {"kernel": "torch-flash"}
    if cfg.get("direction", "fwd") != "fwd":
        return torch_flash
    from ..hardware import load_gpu
    d = int(cfg["head_dim"])
    # flash-attention's forward stages O through shared memory (fa2.py, output_layout)
    if d <= 64:
        return {"block_q": 128, "block_kv": 128, "warps": 4, **torch_flash}
    if d <= 128:
        return {"block_q": 128, "block_kv": 64, "warps": 4, **torch_flash}
    if d == 256:
        if load_gpu(gpu).shared_memory_per_sm_bytes < 4 * d * (64 + 2 * 64):
            return {"block_q": 128, "block_kv": 64, "warps": 8, **torch_flash}
        return {"block_q": 64, "block_kv": 64, "warps": 4, **torch_flash}
    return torch_flash


def _workers(n_jobs: int) -> int:
    from ..parallel import worker_count
    return worker_count(n_jobs, "IOSIM_VALIDATE_WORKERS")


def _gpu_time_s(m: dict) -> float:
    """The kernels' GPU time: Nsight Compute's gpu__time_duration summed over the
    configuration's kernels where measured, else the CUDA-event median. The two agree within 3%
    on every row of the committed sweep but one: standard attention at N = 512, whose event
    time carries the Python harness's launch gaps between its three kernels (+75%); the
    simulator models the kernels, not the harness. Both are shown by `iosim validate`."""
    ncu = _float(m.get("ncu_time_s"))
    return ncu if ncu is not None else float(m["time_s"])


def _run_jobs(jobs: list) -> dict:
    """Simulate each distinct job once (worker processes); results keyed by the job's JSON.
    Progress on stderr once it takes more than 2 s."""
    from ..progress import Progress
    unique = list(dict.fromkeys(json.dumps(j, sort_keys=True) for j in jobs))
    n = _workers(len(unique))
    bar = Progress(len(unique), desc="validate", delay=2.0)
    results = {}
    if n > 1:
        with ProcessPoolExecutor(n) as ex:
            for u, r in zip(unique, ex.map(_predict_one, [json.loads(u) for u in unique])):
                results[u] = r
                bar.step()
    else:
        for u in unique:
            results[u] = _predict_one(json.loads(u))
            bar.step()
    bar.close()
    return results


def measured_tiling(cfg: dict, m: dict) -> dict:
    """The forward tiling a project-kernel row was measured with (the CSV's block_q, block_kv,
    stages, warps), so that the prediction is of the schedule that ran even after a
    generator's defaults change. Forward rows only: the columns record the forward pass.
    Not the standard schedule's: its GEMMs are cuBLAS's, which picks its tile by its own
    heuristic whatever the columns say (gemm_tiling)."""
    if cfg.get("direction", "fwd") != "fwd" or cfg.get("algorithm") == "standard":
        return {}
    out = {}
    for key in TILING_COLUMNS:
        v = _float(m.get(key))
        if v is not None:
            out[key] = int(v)
    return out


def gemm_tiling(cfg: dict, kernel_names: list | None, gpu=None) -> dict:
    """The kernels cuBLAS ran for a standard-attention row's GEMMs, read from the names Nsight
    Compute recorded (algorithms/cublas_tiles.py: nvjet's names state the tile, its stages and
    its thread-block cluster; cublas_fallback.tile_of_kernel_name: a CUTLASS fallback
    kernel's tile, K step and stages, its launch as Nsight Compute measured it), as torch
    flash's rows are described by the tiles its launcher picks: the prediction is of the
    kernels that ran. Where a name is of no such kernel or none was recorded, the schedule
    keeps its rule (standard.gemm_tile, cublas_fallback's first tile), which is what
    `iosim run` uses for a problem nobody has measured; scripts/cublas_given_tiles.py scores
    the rule against the names. The names are of sm90 kernels (TMA, clusters, the fallback
    where a TMA descriptor cannot describe S): on a GPU without TMA (`--gpu a100`) the rule
    describes the row."""
    if cfg.get("algorithm") != "standard" or not kernel_names:
        return {}
    if gpu is not None:
        from ..hardware import load_gpu
        if not load_gpu(gpu).features.tma:
            return {}
    from ..algorithms.cublas_tiles import from_kernel_names
    from ..algorithms.standard import BACKWARD_GEMMS, FORWARD_GEMMS
    direction = cfg.get("direction", "fwd")
    gemms = ((FORWARD_GEMMS if direction in ("fwd", "fwd+bwd") else ())
             + (BACKWARD_GEMMS if direction in ("bwd", "fwd+bwd") else ()))
    tiles = from_kernel_names(kernel_names, gemms)
    return {"gemm_tiles": tiles} if tiles else {}


def row_tiling(cfg: dict, m: dict, gpu, kernel_names: list | None = None) -> dict:
    """What the row's kernels launched: the project's kernels as measured (their tiling
    columns; cuBLAS's GEMMs by their kernel names), an external implementation by its own
    launch rules."""
    if cfg.get("impl") == "iosim":
        return measured_tiling(cfg, m) or gemm_tiling(cfg, kernel_names, gpu)
    return implementation_tiling(cfg, gpu)


def predict_rows(sweep: dict, measured: dict, gpu: str | None = None, model: str = "sim",
                 topic: str = "sweep", results: dict | None = None,
                 kernel_names: dict | None = None) -> list:
    """One Row per configuration with a measurement; kernel_names: {config id: the names of
    its kernels in launch order} (formats.load_kernel_names), for the tiles cuBLAS ran."""
    gpu = gpu or sweep.get("gpu", "h200-calibrated")
    if model != "sim":
        raise IosimError("validation predicts with the simulator (model 'sim') only")
    todo = []
    for pos, cfg in enumerate(sweep["configs"]):
        m = measured.get(cfg["id"])
        if m is None or _float(m.get("time_s")) is None:
            continue
        todo.append((pos, cfg, m))
    jobs = [({k: cfg[k] for k in PROBLEM_KEYS if k in cfg}, cfg["algorithm"], gpu,
             row_tiling(cfg, m, gpu, (kernel_names or {}).get(cfg["id"])))
            for _pos, cfg, m in todo]
    if results is None:
        results = _run_jobs(jobs)
    rows = []
    for (pos, cfg, m), job in zip(todo, jobs):
        a = results[json.dumps(job, sort_keys=True)]
        dram_r, dram_w = _float(m.get("dram_read_bytes")), _float(m.get("dram_write_bytes"))
        rows.append(Row(
            id=cfg["id"], impl=cfg["impl"], algorithm=cfg["algorithm"],
            direction=cfg["direction"], train=_train(pos, cfg),
            measured_time_s=_gpu_time_s(m), event_time_s=float(m["time_s"]),
            predicted_time_s=a["time_s"],
            measured_l2_to_sm_bytes=_float(m.get("l2_to_sm_read_bytes")),
            predicted_l2_to_sm_bytes=a["l2_to_sm_bytes"],
            measured_dram_bytes=(dram_r + dram_w) if dram_r is not None and dram_w is not None else None,
            predicted_dram_bytes=a["dram_bytes"], dataset=topic, breakdown=a.get("breakdown"),
            measured_dram_read_bytes=dram_r, measured_dram_write_bytes=dram_w,
            predicted_dram_read_bytes=a.get("dram_read_bytes"),
            predicted_dram_write_bytes=a.get("dram_write_bytes"), tiling=job[3] or None))
    return rows


def summarize(rows: list) -> dict:
    def stats(sel, attr):
        errs = [abs(getattr(r, attr)) for r in sel if getattr(r, attr) is not None]
        if not errs:
            return {"n": 0, "mape": None, "max_abs_err": None}
        return {"n": len(errs), "mape": sum(errs) / len(errs), "max_abs_err": max(errs)}

    out = {}
    for kind, pred in (("project", lambda r: r.impl == "iosim"),
                       ("external", lambda r: r.impl != "iosim")):
        sel = [r for r in rows if pred(r)]
        out[kind] = {
            "time": stats(sel, "time_err"),
            "time_held_out": stats([r for r in sel if not r.train], "time_err"),
            "l2_to_sm_bytes": stats(sel, "l2_err"),
            "dram_bytes": stats(sel, "dram_err"),
        }
    return out


def check_budgets(summary: dict) -> list:
    """Budget violations as one-line strings (empty when every budget holds)."""
    fails = []
    p, e = summary["project"], summary["external"]
    b = BUDGETS["project"]
    checks = [
        (p["l2_to_sm_bytes"]["max_abs_err"], b["l2_to_sm_bytes_max_abs_err"], "project L2→SM bytes max error"),
        (p["dram_bytes"]["max_abs_err"], b["dram_bytes_max_abs_err"], "project DRAM bytes max error"),
        (p["time"]["mape"], b["time_mape"], "project time MAPE"),
        (p["time"]["max_abs_err"], b["time_max_abs_err"], "project time max error"),
        (p["time_held_out"]["mape"], b["time_mape"], "project held-out time MAPE"),
        (p["time_held_out"]["max_abs_err"], b["time_max_abs_err"], "project held-out time max error"),
        (e["time"]["mape"], BUDGETS["external"]["time_mape"], "external time MAPE"),
    ]
    for value, limit, name in checks:
        if value is not None and value > limit:
            fails.append(f"{name} {value:.1%} exceeds {limit:.0%}")
    return fails


def sweep_pairs(directory: Path | None = None) -> list:
    """(topic, sweep path, measurements path) of every sweep in the validation directory that
    has its measurements: sweep.yaml + measured_h200.csv ("sweep"), and each
    sweep_<topic>.yaml + measured_h200_<topic>.csv."""
    directory = Path(directory or VALIDATION_DIR)
    pairs = [("sweep", directory / "sweep.yaml", directory / "measured_h200.csv")]
    for p in sorted(directory.glob("sweep_*.yaml")):
        topic = p.stem[len("sweep_"):]
        pairs.append((topic, p, directory / f"measured_h200_{topic}.csv"))
    return [t for t in pairs if t[1].is_file() and t[2].is_file()]


def validate_dataset(sweep_path: Path | None = None, measured_path: Path | None = None,
                     gpu: str | None = None) -> tuple[list, dict]:
    """Rows and summary of one sweep/measurements pair, or (neither given) of every pair."""
    if sweep_path or measured_path:
        pairs = [("sweep" if not sweep_path or Path(sweep_path).stem == "sweep"
                  else Path(sweep_path).stem.removeprefix("sweep_"),
                  Path(sweep_path or VALIDATION_DIR / "sweep.yaml"),
                  Path(measured_path or VALIDATION_DIR / "measured_h200.csv"))]
    else:
        pairs = sweep_pairs()
    loaded = []
    for topic, sp, mp in pairs:
        sweep = load_sweep(Path(sp))           # typed (formats.SweepFile)
        measured = load_measurements(Path(mp))
        names = load_kernel_names(Path(mp).with_name(Path(mp).stem + "_kernels.csv"))
        loaded.append((topic, sp, mp, sweep, measured, names))
    rows = []
    for topic, sp, mp, sweep, measured, names in loaded:
        got = predict_rows(sweep, measured, gpu, topic=topic, kernel_names=names)
        if not got:
            raise IosimError(f"no configuration of {sp} has a measurement in {mp}")
        rows += got
    return rows, summarize(rows)


# ---- published figures ------------------------------------------------------------------
@dataclass
class PublishedRow:
    id: str
    paper: str
    figure: str
    panel: str
    series: str
    gpu: str
    algorithm: str
    causal: bool
    head_dim: int
    seq_q: int
    measured_tflops_per_s: float
    predicted_tflops_per_s: float
    measured_time_s: float
    predicted_time_s: float
    direction: str = "fwd"
    breakdown: dict | None = None

    @property
    def time_err(self) -> float:
        return self.predicted_time_s / self.measured_time_s - 1

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["time_err"] = self.time_err
        return d


def paper_flops(problem) -> float:
    """FLOPs as the FlashAttention papers count them: 4·B·H·N²·d for the forward pass (two
    GEMMs), halved under a causal mask; backward 2.5× the forward (five GEMMs, the forward's
    two recomputed), fwd+bwd 3.5× (FA-2 paper §4.1; benchmarks/benchmark_flash_attention.py
    of Dao-AILab/flash-attention, `flops(..., mode)`)."""
    f = 4 * problem.batch * problem.heads_q * problem.seq_q * problem.seq_kv * problem.head_dim
    if problem.causal:
        f /= 2
    return f * {"fwd": 1.0, "bwd": 2.5, "fwd+bwd": 3.5}[problem.direction]


@dataclass(frozen=True)
class PublishedPoint:
    """One row of published.csv: the problem to predict and the time the paper's TFLOP/s
    stand for (the paper's FLOP count over its rate)."""
    source: dict            # the CSV row as read
    problem: dict           # AttentionProblem keyword arguments
    algorithm: str
    gpu: str
    flops: float            # paper_flops(problem)
    measured_time_s: float


_INT_KEYS = ("batch", "heads_q", "heads_kv", "seq_q", "seq_kv", "head_dim")


def load_published(path: Path | None = None, gpu: str | None = None) -> list:
    """published.csv's rows as PublishedPoints (every direction the papers report: fwd, bwd,
    fwd+bwd); a row that is not a valid problem or has no positive rate is refused, naming it."""
    from ..problem import AttentionProblem
    path = Path(path or VALIDATION_DIR / "published.csv")
    if not path.is_file():
        raise IosimError(f"no published dataset at {path}")
    with path.open() as f:
        src = list(csv.DictReader(f))
    out = []
    for r in src:
        rid = r.get("id") or "?"
        kw = {k: r[k] for k in PROBLEM_KEYS if r.get(k) not in (None, "")}
        try:
            for k in _INT_KEYS:
                if k in kw:
                    kw[k] = int(kw[k])
            rate = float(r["tflops_per_s"]) * 1e12
        except (KeyError, TypeError, ValueError) as e:
            raise IosimError(f"{path.name} row {rid}: {e}") from None
        if not rate > 0:
            raise IosimError(f"{path.name} row {rid}: tflops_per_s must be positive")
        kw["causal"] = str(kw.get("causal", "False")).lower() == "true"
        try:
            flops = paper_flops(AttentionProblem(**kw))
        except IosimError as e:
            raise IosimError(f"{path.name} row {rid}: {e}") from None
        out.append(PublishedPoint(source=r, problem=kw, algorithm=r["algorithm"],
                                  gpu=gpu or r["gpu"], flops=flops,
                                  measured_time_s=flops / rate))
    return out


def published_tiling(point) -> dict:
    """The papers' FlashAttention-2 series ran flash-attention's kernels (the FA-2 paper's own,
    the FA-3 paper's FA-2 baseline): their backward adds dQaccum coalesced (`kernel=
    "flash-attn"`, iosim/algorithms/fa2.py), as torch flash's rows on the H200 are described;
    those kernels and the FA-3 paper's FA-3 store their outputs through shared memory
    (Store.layout "coalesced")."""
    return {"kernel": "flash-attn"} if point.algorithm in ("fa2", "fa3") else {}


def validate_published(path: Path | None = None, gpu: str | None = None) -> tuple[list, dict]:
    points = load_published(path, gpu)
    jobs = [(p.problem, p.algorithm, p.gpu, published_tiling(p)) for p in points]
    results = _run_jobs(jobs)
    rows = []
    for p, job in zip(points, jobs):
        a = results[json.dumps(job, sort_keys=True)]
        r = p.source
        rows.append(PublishedRow(
            id=r["id"], paper=r["paper"], figure=r["figure"], panel=r["panel"],
            series=r["series"], gpu=p.gpu, algorithm=p.algorithm,
            causal=p.problem["causal"], head_dim=p.problem["head_dim"], seq_q=p.problem["seq_q"],
            measured_tflops_per_s=p.flops / p.measured_time_s / 1e12,
            predicted_tflops_per_s=p.flops / a["time_s"] / 1e12,
            measured_time_s=p.measured_time_s, predicted_time_s=a["time_s"],
            direction=p.problem.get("direction", "fwd"), breakdown=a.get("breakdown")))
    return rows, summarize_published(rows)


def summarize_published(rows: list) -> dict:
    """Time errors over all rows, then split by series, by GPU and by direction."""
    def stats(sel):
        errs = [abs(r.time_err) for r in sel]
        if not errs:
            return {"n": 0, "mape": None, "max_abs_err": None}
        return {"n": len(errs), "mape": sum(errs) / len(errs), "max_abs_err": max(errs),
                "mean_signed_err": sum(r.time_err for r in sel) / len(sel)}
    out = {"published": {"time": stats(rows)}}
    for key, label in (("series", "series"), ("gpu", "gpu"), ("direction", "direction")):
        for v in sorted({getattr(r, key) for r in rows}):
            out["published"][f"{label} {v}"] = stats([r for r in rows if getattr(r, key) == v])
    return out


def check_published_budgets(summary: dict) -> list:
    fails = []
    b = BUDGETS["published"]
    t = summary["published"]["time"]
    for value, limit, name in ((t["mape"], b["time_mape"], "published time MAPE"),
                               (t["max_abs_err"], b["time_max_abs_err"], "published time max error")):
        if value is not None and value > limit:
            fails.append(f"{name} {value:.1%} exceeds {limit:.0%}")
    return fails


def _pct(v):
    return "—" if v is None else f"{v:+.1%}"


@click.command()
@click.option("--dataset", type=click.Choice(DATASETS), default="h200", show_default=True,
              help="h200: every sweep/measurement pair in iosim/data/validation/; published: "
                   "figures from the FlashAttention papers (published.csv).")
@click.option("--sweep", "sweep_path", type=click.Path(exists=True, dir_okay=False),
              help="One sweep YAML instead of every pair (h200 dataset).")
@click.option("--measured", "measured_path", type=click.Path(dir_okay=False),
              help="Its measurements CSV [measured_h200.csv].")
@click.option("--gpu", help="GPU config to predict with [each row's own].")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def validate(dataset, sweep_path, measured_path, gpu, fmt):
    """Predict every measured configuration; report errors against the budgets."""
    if dataset == "published":
        if sweep_path or measured_path:
            raise IosimError("--sweep/--measured apply to the h200 dataset only")
        rows, summary = validate_published(gpu=gpu)
        fails = check_published_budgets(summary)
        if fmt == "json":
            click.echo(json.dumps({"dataset": "published", "rows": [r.to_dict() for r in rows],
                                   "summary": summary, "budget_failures": fails}, indent=2))
            return
        click.echo(f"{'id':<46} {'dir':<7} {'paper TF/s':>10} {'pred TF/s':>10} {'t err':>7}")
        for r in rows:
            click.echo(f"{r.id:<46} {r.direction:<7} {r.measured_tflops_per_s:>10.0f} "
                       f"{r.predicted_tflops_per_s:>10.0f} {_pct(r.time_err):>7}")
        for k, v in summary["published"].items():
            click.echo(f"{k:<28} n {v['n']:>3}  time MAPE {_pct(v['mape'])}, max {_pct(v['max_abs_err'])}, "
                       f"mean signed {_pct(v['mean_signed_err'])}")
        click.echo("budgets: " + ("all hold" if not fails else "; ".join(fails)))
        return
    rows, summary = validate_dataset(
        Path(sweep_path) if sweep_path else None,
        Path(measured_path) if measured_path else None, gpu)
    fails = check_budgets(summary)
    if fmt == "json":
        click.echo(json.dumps({"dataset": "h200", "rows": [r.to_dict() for r in rows],
                               "summary": summary, "budget_failures": fails}, indent=2))
        return
    click.echo(f"{'id':<44} {'split':<5} {'event':>9} {'meas':>9} {'pred':>9} {'t err':>7} "
               f"{'L2→SM':>7} {'DRAM':>7}")
    for r in rows:
        click.echo(f"{r.id:<44} {'train' if r.train else 'test':<5} "
                   f"{r.event_time_s * 1e3:>7.3f}ms {r.measured_time_s * 1e3:>7.3f}ms {r.predicted_time_s * 1e3:>7.3f}ms "
                   f"{_pct(r.time_err):>7} {_pct(r.l2_err):>7} {_pct(r.dram_err):>7}")
    click.echo("")
    for kind, s in summary.items():
        click.echo(f"{kind:<8} time MAPE {_pct(s['time']['mape'])} (held out {_pct(s['time_held_out']['mape'])}), "
                   f"max {_pct(s['time']['max_abs_err'])}; "
                   f"L2→SM max {_pct(s['l2_to_sm_bytes']['max_abs_err'])}; DRAM max {_pct(s['dram_bytes']['max_abs_err'])}")
    click.echo("budgets: " + ("all hold" if not fails else "; ".join(fails)))
