"""What every command shares, defined once: the click options of the problem, the tiling, the
time model and the output (run, compare, report, teach, sweep), how options and a scenario
resolve into an AttentionProblem (also the API's keyword vocabulary), the checks made before
any work, and the command group that turns bad input into one line and exit code 2.

To add an option to every command that takes a problem, add one entry to PROBLEM_OPTIONS (or
TILING_OPTIONS, MODEL_OPTIONS, OUTPUT_OPTIONS); a command takes groups with `use(...)`.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click

from .algorithms import ALGORITHMS, DECODE_KEYS, GEMM_TILE_KEYS
from .algorithms import TILING_KEYS as PASS_TILING_KEYS
from .algorithms.common import MAX_WARPS, WARPGROUP
from .errors import IosimError
from .limits import MAX_BATCH_HEADS, MAX_SEQ
from .problem import (DIRECTIONS, DTYPE_BYTES, PAGE_LAYOUTS, PROBLEM_DEFAULTS, PROBLEM_KEYS,
                      SUPPORTED_HEAD_DIMS, AttentionProblem)

DEFAULT_GPU = "h100"
DEFAULT_ALGORITHM = "fa2"
DEFAULT_ALGORITHMS = ("standard", "fa1", "fa2", "fa3")
MAX_SEQ_POINTS = 64              # values in one --seq list of `report`/`sweep`

SEQ = click.IntRange(1, MAX_SEQ)
COUNT = click.IntRange(1, MAX_BATCH_HEADS)     # batch, heads
POSITIVE = click.IntRange(min=1)
# the API's short keywords, as the CLI spells them (seq=, heads=, kv_heads=)
# schedule overrides a user may give: per-pass tiling (also as bwd_*), flash-decoding's splits
# and the GEMM tiles cuBLAS runs for standard attention
TILING_KEYS = PASS_TILING_KEYS + DECODE_KEYS + GEMM_TILE_KEYS
API_ALIASES = {"seq": "seq_q", "heads": "heads_q", "kv_heads": "heads_kv"}


def option(*decls, **kw) -> tuple:
    return decls, kw


def _int_list(ctx, param, value):
    """'4096,512,77' -> (4096, 512, 77); a bad item is a one-line usage error."""
    if value is None:
        return None
    try:
        return tuple(int(v) for v in value.split(","))
    except ValueError:
        raise click.BadParameter(f"must be comma-separated integers, got {value!r}") from None


def _warps(ctx, param, value):
    if value is not None and (value % WARPGROUP or not WARPGROUP <= value <= MAX_WARPS):
        raise click.BadParameter(f"{value} is not a multiple of {WARPGROUP} (whole warpgroups) "
                                 f"from {WARPGROUP} to {MAX_WARPS} (1024 threads)")
    return value


# ---- the options, one entry each ----------------------------------------------------------
SCENARIO_OPTION = option("--scenario", help="Named scenario (iosim scenarios lists them) or a "
                                            "YAML path; other options override its fields.")
GPU_OPTION = option("--gpu", help="a100, h100, h200, or a GPU YAML path [h100].")
ALGO_OPTION = option("--algo", "algorithm",
                     help=f"{', '.join(ALGORITHMS)} [{DEFAULT_ALGORITHM}].")
ALGOS_OPTION = option("--algos", help=f"Comma-separated algorithms from {', '.join(ALGORITHMS)} "
                                      f"[{','.join(DEFAULT_ALGORITHMS)}].")

# keyed by AttentionProblem field (problem.PROBLEM_KEYS); defaults shown are AttentionProblem's
D = PROBLEM_DEFAULTS
PROBLEM_OPTIONS = {
    "batch": option("--batch", type=COUNT, help=f"Batch size [{D['batch']}]."),
    "heads_q": option("--heads", "heads_q", type=COUNT, help=f"Query heads [{D['heads_q']}]."),
    "heads_kv": option("--kv-heads", "heads_kv", type=COUNT,
                       help="KV heads (GQA/MQA), dividing heads [= heads]."),
    "seq_q": option("--seq", "seq_q", type=SEQ,
                    help=f"Sequence length (queries) [{D['seq_q']}]."),
    "seq_kv": option("--seq-kv", "seq_kv", type=SEQ,
                     help="KV sequence length [= seq]."),
    "head_dim": option("--head-dim", "head_dim", type=POSITIVE,
                       help=f"Head dimension: {', '.join(map(str, SUPPORTED_HEAD_DIMS))} [{D['head_dim']}]."),
    "dtype": option("--dtype", type=click.Choice(list(DTYPE_BYTES)),
                    help=f"[{D['dtype']}]; fp8 is forward only."),
    "causal": option("--causal/--no-causal", default=None,
                     help="Causal mask, bottom-right aligned when seq-kv ≠ seq [no]."),
    "direction": option("--direction", type=click.Choice(list(DIRECTIONS)), help=f"[{D['direction']}]"),
    # KV cache (decode and serving: iosim/algorithms/kvcache.py, flash_decoding.py)
    "seq_kv_list": option("--seq-kv-list", "seq_kv_list", callback=_int_list,
                          help="Per-request KV lengths, comma-separated, one per batch entry "
                               "(continuous batching; flash-decoding)."),
    "prefix_len": option("--prefix-len", "prefix_len", type=click.IntRange(min=0),
                         help="Prompt prefix shared by every request, its KV stored once [0]."),
    "page_size": option("--page-size", "page_size", type=POSITIVE,
                        help="Paged KV: tokens per page, a power of two [not paged]."),
    "page_layout": option("--page-layout", "page_layout", type=click.Choice(list(PAGE_LAYOUTS)),
                          help="How the block table places pages [contiguous]."),
}

TILING_OPTIONS = {
    "block_q": option("--block-q", type=POSITIVE, help="Override the Q (row) block size."),
    "block_kv": option("--block-kv", type=POSITIVE, help="Override the KV (column) block size."),
    "stages": option("--stages", type=POSITIVE, help="Override the pipeline depth."),
    "warps": option("--warps", type=POSITIVE, callback=_warps,
                    help=f"Override warps per CTA: a multiple of {WARPGROUP}, at most {MAX_WARPS}."),
    "splits": option("--splits", type=POSITIVE,
                     help="flash-decoding: KV splits [FlashAttention-2's num_splits heuristic]."),
    "gemm_tiles": option("--gemm-tiles", "gemm_tiles",
                         help="standard: the tiles cuBLAS runs, e.g. "
                              "'std_fwd_qk=200x128x5/1x2;std_fwd_pv=184x64x6' (rows x cols x "
                              "stages, then an optional cluster of rows x cols CTAs; an nvjet "
                              "kernel name states them; where S's pitch is off 16 bytes, a CUTLASS "
                              "fallback kernel's name, e.g. 'std_fwd_pv=cutlass_80_tensorop_f16_"
                              "s16816gemm_f16_64x64_64x4_nn_align2') [the model's rule]."),
}

MODEL_OPTIONS = {
    "model": option("--model", type=click.Choice(["sim", "roofline"]), default="sim",
                    show_default=True, help="Time model."),
    "sim_mode": option("--mode", "sim_mode", type=click.Choice(["fast", "exact"]),
                       default="fast", show_default=True, help="Simulator mode."),
    "l2_samples": option("--l2-samples", "l2_samples", type=click.IntRange(1000, 10_000_000),
                         default=None,
                         help="Tile accesses the fast mode's L2 model replays [50000], at most "
                              "10,000,000; more is slower and, near the L2 capacity threshold, "
                              "closer to exact mode."),
}

OUTPUT_OPTIONS = {
    "fmt": option("--format", "fmt", type=click.Choice(["table", "json", "csv"]),
                  default="table", show_default=True),
    "output": option("-o", "--output", type=click.Path(dir_okay=False),
                     help="Write to this file instead of stdout."),
    "force": option("--force", is_flag=True, help="Overwrite --output if it exists."),
}


def use(*groups, only: tuple | None = None):
    """A decorator adding the options of `groups` (single options or dicts of them) in order;
    `only` keeps the named entries of the dicts (single options are always kept)."""
    entries = []
    for g in groups:
        items = g.items() if isinstance(g, dict) else [(None, g)]
        for name, opt in items:
            if only is None or name is None or name in only:
                entries.append(opt)

    def deco(f):
        for decls, kw in reversed(entries):
            f = click.option(*decls, **kw)(f)
        return f
    return deco


problem_options = use(SCENARIO_OPTION, PROBLEM_OPTIONS, GPU_OPTION, TILING_OPTIONS,
                      MODEL_OPTIONS, OUTPUT_OPTIONS)


# ---- resolving options and a scenario ------------------------------------------------------
@dataclass
class Resolved:
    problem: AttentionProblem
    gpu: str
    scenario: dict = field(default_factory=dict)
    tiling: dict = field(default_factory=dict)


def pick(kw: dict, scen: dict, key: str, default=None):
    """An option's value if given, else the scenario's, else the default."""
    value = kw.get(key)
    if value is not None:
        return value
    value = scen.get(key)
    return default if value is None else value


def resolve(kw: dict, **fixed) -> Resolved:
    """The problem (options over scenario over defaults; `fixed` over all), the GPU name and
    the tiling overrides."""
    scen = {}
    if kw.get("scenario"):
        from .scenarios import load_scenario
        scen = load_scenario(kw["scenario"])
    fields = {k: pick(kw, scen, k, PROBLEM_DEFAULTS[k]) for k in PROBLEM_KEYS}
    fields.update(fixed)
    problem = AttentionProblem(**fields)
    problem.check_modelled()
    gpu = pick(kw, scen, "gpu", DEFAULT_GPU)
    tiling = {k: pick(kw, scen, k) for k in TILING_KEYS}
    return Resolved(problem, gpu, scen, {k: v for k, v in tiling.items() if v is not None})


def problem_from_kwargs(kwargs: dict) -> tuple[AttentionProblem, dict]:
    """The API's keywords (problem fields, their short aliases, tiling overrides and bwd_
    tiling overrides) as (problem, tiling)."""
    fields, tiling = {}, {}
    for k, v in kwargs.items():
        k = API_ALIASES.get(k, k)
        if k in TILING_KEYS or (k.startswith("bwd_") and k[4:] in PASS_TILING_KEYS):
            tiling[k] = v
        elif k in PROBLEM_KEYS:
            fields[k] = v
        else:
            known = sorted(set(PROBLEM_KEYS) | set(API_ALIASES) | set(TILING_KEYS))
            raise IosimError(f"unknown keyword {k!r}; expected one of: {', '.join(known)}")
    problem = AttentionProblem(**fields)
    problem.check_modelled()
    return problem, tiling


def say_warnings(problem) -> None:
    for w in problem.warnings():
        click.echo(f"warning: {w}", err=True)


# ---- algorithm names and lists ----------------------------------------------------------
def algorithm(name: str | None, scen: dict | None = None) -> str:
    """One algorithm: the option's, else the scenario's, else fa2; refused unless known."""
    name = name if name is not None else (scen or {}).get("algorithm", DEFAULT_ALGORITHM)
    if name not in ALGORITHMS:
        raise IosimError(f"--algo: unknown algorithm {name!r}; choose from: {', '.join(ALGORITHMS)}")
    return name


def algorithm_list(text: str | None, scen: dict | None = None,
                   default=DEFAULT_ALGORITHMS) -> list[str]:
    """A comma list of algorithms (option, else the scenario's list, else `default`), each
    known, no empty items, duplicates dropped."""
    if text is None:
        names = list((scen or {}).get("algorithms") or default)
    else:
        names = [s.strip() for s in str(text).split(",")]
        if not any(names) or "" in names:
            raise IosimError(f"--algos: {text!r} has an empty name; give a comma list from: "
                             f"{', '.join(ALGORITHMS)}")
    unknown = [n for n in names if n not in ALGORITHMS]
    if unknown:
        raise IosimError(f"--algos: unknown algorithm(s) {', '.join(map(repr, unknown))}; "
                         f"choose from: {', '.join(ALGORITHMS)}")
    return list(dict.fromkeys(names))


# ---- sequence lists (report, sweep) ---------------------------------------------------------
SEQ_LIST_HELP = (f"A..B (A, 2A, 4A, … doubling up to B: powers of two when A is one), a comma "
                 f"list, or one N; each at most {MAX_SEQ:,}, at most {MAX_SEQ_POINTS} values")


def parse_seq_list(text, what: str = "--seq") -> list[int]:
    """'1024..65536' → 1024, 2048, …, 65536; '1000..4000' → 1000, 2000, 4000; '4096,1024' →
    [1024, 4096]; '2048' → [2048]. Refused: empty items, non-integers, values outside
    1..MAX_SEQ, more than MAX_SEQ_POINTS values."""
    text = str(text).strip()
    bad = IosimError(f"{what} must be {SEQ_LIST_HELP}; got {text!r}")
    try:
        if ".." in text:
            lo_s, hi_s = text.split("..", 1)
            lo, hi = int(lo_s), int(hi_s)
            if lo <= 0 or hi < lo:
                raise bad
            _in_range(hi, what)
            out, n = [], lo
            while n <= hi:
                out.append(n)
                n *= 2
            return out
        items = [v.strip() for v in text.split(",")]
        if "" in items:
            raise bad
        values = sorted({int(v) for v in items})
    except ValueError:
        raise bad from None
    if values[0] <= 0:
        raise bad
    _in_range(values[-1], what)
    if len(values) > MAX_SEQ_POINTS:
        raise IosimError(f"{what} has {len(values)} values; at most {MAX_SEQ_POINTS}")
    return values


def _in_range(n: int, what: str) -> None:
    if n > MAX_SEQ:
        raise IosimError(f"{what} value {n:,} is above the limit of {MAX_SEQ:,} tokens "
                         f"(docs/limits.md)")


# ---- output -----------------------------------------------------------------------------
def check_output(output: str | None, force: bool, flag: str = "--output") -> None:
    """Refuse, before any work, an output path that would not be written: an existing file
    without --force, a directory, a folder that cannot be created or written."""
    if not output:
        return
    path = Path(output)
    if path.is_dir():
        raise IosimError(f"{flag} {output} is a directory; give a file path")
    if path.exists() and not force:
        raise IosimError(f"{output} exists; pass --force to overwrite it")
    if path.exists() and not os.access(path, os.W_OK):
        raise IosimError(f"{flag} {output} is not writable")
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise IosimError(f"{flag} {output}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise IosimError(f"{flag} {output}: the folder {parent} is not writable")
    import tempfile
    try:   # what the permission bits do not say (a read-only file system): try, leave nothing
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise IosimError(f"{flag} {output}: cannot write in {parent}: "
                         f"{exc.strerror or exc}") from None


def write_output(text: str, output: str | None, force: bool) -> None:
    """Text to stdout, or to `output` (checked by check_output first)."""
    if not output:
        click.echo(text.rstrip("\n"))
        return
    check_output(output, force)
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    click.echo(f"wrote {output}", err=True)


# ---- the command group --------------------------------------------------------------------
class IosimGroup(click.Group):
    """Turns IosimError (and a few library errors) into one line and exit code 2; click's
    usage errors (a bad option value, an unknown option) too, instead of its usage block."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else 0
        except click.ClickException as exc:
            msg = " ".join(exc.format_message().split())
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                msg += f" (see '{exc.ctx.command_path} --help')"
            click.echo(f"error: {msg}", err=True)
            code = exc.exit_code
        except click.Abort:
            click.echo("aborted", err=True)
            code = 1
        if standalone_mode:
            sys.exit(code)
        return code

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except IosimError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(2)
        except (ValueError, OSError) as exc:
            msg = " ".join(str(exc).split()) or type(exc).__name__
            click.echo(f"error: {msg}", err=True)
            ctx.exit(2)

