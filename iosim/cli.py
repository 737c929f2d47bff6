"""Command-line interface: parses options and prints; the work lives in importable modules."""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import click

from .errors import IosimError

PROBLEM_DEFAULTS = dict(batch=1, heads_q=32, heads_kv=None, seq_q=4096, seq_kv=None,
                        head_dim=128, dtype="fp16", causal=False, direction="fwd")


# ---- shared options, defined once ---------------------------------------------------------
def problem_options(f):
    opts = [
        click.option("--scenario", help="Named scenario (iosim scenarios lists them) or a YAML path; "
                                        "other options override its fields."),
        click.option("--batch", type=int, help="Batch size [1]."),
        click.option("--heads", "heads_q", type=int, help="Query heads [32]."),
        click.option("--kv-heads", "heads_kv", type=int, help="KV heads (GQA/MQA) [= heads]."),
        click.option("--seq", "seq_q", type=int, help="Sequence length (queries) [4096]."),
        click.option("--seq-kv", "seq_kv", type=int, help="KV sequence length [= seq]."),
        click.option("--head-dim", "head_dim", type=int, help="Head dimension [128]."),
        click.option("--dtype", type=click.Choice(["fp16", "bf16", "fp8"]), help="[fp16]"),
        click.option("--causal/--no-causal", default=None, help="Causal mask [no]."),
        click.option("--direction", type=click.Choice(["fwd", "bwd", "fwd+bwd"]), help="[fwd]"),
        click.option("--gpu", help="a100, h100, h200, or a GPU YAML path [h100]."),
        click.option("--block-q", type=int, help="Override the Q (row) block size."),
        click.option("--block-kv", type=int, help="Override the KV (column) block size."),
        click.option("--stages", type=int, help="Override the pipeline depth."),
        click.option("--warps", type=int, help="Override warps per CTA."),
        click.option("--model", type=click.Choice(["sim", "roofline"]), default="sim",
                     show_default=True, help="Time model."),
        click.option("--mode", "sim_mode", type=click.Choice(["fast", "exact"]), default="fast",
                     show_default=True, help="Simulator mode."),
        click.option("--l2-samples", "l2_samples", type=click.IntRange(min=1000), default=None,
                     help="Tile accesses the fast mode's L2 model replays [50000]; more is "
                          "slower and, near the L2 capacity threshold, closer to exact mode."),
        click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]),
                     default="table", show_default=True),
        click.option("-o", "--output", type=click.Path(dir_okay=False),
                     help="Write to this file instead of stdout."),
        click.option("--force", is_flag=True, help="Overwrite --output if it exists."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


TILING_KEYS = ("block_q", "block_kv", "stages", "warps")


def resolve(kw: dict) -> tuple:
    """(problem, gpu name, scenario dict, tiling overrides) from options and scenario."""
    from .problem import AttentionProblem
    from .scenarios import load_scenario
    scen = load_scenario(kw["scenario"]) if kw.get("scenario") else {}
    fields = {}
    for key, default in PROBLEM_DEFAULTS.items():
        value = kw.get(key)
        fields[key] = value if value is not None else scen.get(key, default)
    problem = AttentionProblem(**fields)
    gpu = kw.get("gpu") or scen.get("gpu") or "h100"
    tiling = {k: kw.get(k) if kw.get(k) is not None else scen.get(k) for k in TILING_KEYS}
    return problem, gpu, scen, {k: v for k, v in tiling.items() if v is not None}


def flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif isinstance(v, (list, tuple)):
            out[key] = json.dumps(v)
        else:
            out[key] = v
    return out


def to_csv(records: list) -> str:
    rows = [flatten(r) for r in records]
    keys = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def emit(text: str, output: str | None, force: bool) -> None:
    if not output:
        click.echo(text.rstrip("\n"))
        return
    path = Path(output)
    if path.exists() and not force:
        raise IosimError(f"{output} exists; pass --force to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text.endswith("\n") else text + "\n")
    click.echo(f"wrote {output}", err=True)


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


# Commands that live with their subsystems; imported only when used, so `iosim run` starts fast.
LAZY_COMMANDS = {
    "capture": ("iosim.kernels.cli", "capture"),
    "measure": ("iosim.measure.cli", "measure"),
    "calibrate": ("iosim.measure.calibrate", "calibrate"),
    "validate": ("iosim.analysis.validate", "validate"),
    "report": ("iosim.report.cli", "report"),
    "teach": ("iosim.teach.cli", "teach"),
}


class LazyGroup(IosimGroup):
    """The top-level group: subcommands in LAZY_COMMANDS are imported only when used (click's
    documented lazy-loading pattern), so `iosim run` starts fast."""

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(LAZY_COMMANDS))

    def get_command(self, ctx, name):
        cmd = super().get_command(ctx, name)
        if cmd is None and name in LAZY_COMMANDS:
            import importlib
            module, attr = LAZY_COMMANDS[name]
            try:
                cmd = getattr(importlib.import_module(module), attr)
            except ImportError as exc:
                raise IosimError(f"`iosim {name}` is unavailable here: {exc}") from None
        return cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="iosim")
def main():
    """iosim: bytes, FLOPs, time and IO bounds of attention on a GPU memory hierarchy."""


@main.command()
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def gpus(fmt):
    """List the bundled GPU configurations."""
    from .hardware import available_gpus, load_gpu
    specs = [load_gpu(n) for n in available_gpus()]
    if fmt == "json":
        click.echo(json.dumps([s.model_dump() for s in specs], indent=2))
        return
    head = (f"{'config':<28} {'short':<16} {'SMs':>4} {'DRAM':>10} {'L2':>9} {'smem/SM':>8} "
            f"{'fp16 peak':>10} {'achievable':>10} {'exp/s':>9}")
    click.echo(head)
    for n, s in zip(available_gpus(), specs):
        click.echo(f"{n:<28} {s.short_name:<16} {s.sm_count:>4} "
                   f"{s.dram_bandwidth_bytes_per_s / 1e12:>6.2f} TB/s {s.l2_capacity_bytes / 2**20:>5.0f} MiB "
                   f"{s.shared_memory_per_sm_bytes / 1024:>4.0f} KiB {s.tensor_peak_rate('fp16') / 1e12:>5.0f} TF/s "
                   f"{s.tensor_rate('fp16') / 1e12:>5.0f} TF/s {s.exp_per_s / 1e12:>5.2f} T")
    click.echo("fp16 peak: datasheet, dense; achievable: what predictions use, at the config's "
               "clock_hz (GPUs with a power_capped_clock run tensor-heavy kernels slower); "
               "sources: iosim gpus --format json")


@main.command()
def scenarios():
    """List the named scenarios."""
    from .scenarios import available_scenarios, load_scenario
    for name in available_scenarios():
        click.echo(f"{name:<28} {load_scenario(name).get('description', '')}")


def _breakdown_lines(a) -> str:
    """`iosim run`'s time breakdown by mechanism (machine.time_breakdown)."""
    b = a.time_breakdown
    if not b:
        return ""
    ms = lambda v: f"{v * 1e3:.3f} ms"  # noqa: E731
    return ("\ntime by mechanism (units overlap; per-SM busy time averaged over SMs)\n"
            f"  MMA at the instruction's rate   {ms(b['mma_s'])}\n"
            f"  MMA operand reads (ldmatrix)    {ms(b['mma_operand_reads_s'])}\n"
            f"  softmax exp                     {ms(b['exp_s'])}\n"
            f"  other elementwise (ALU)         {ms(b['alu_s'])}\n"
            f"  L2 / DRAM transfer              {ms(b['l2_s'])} / {ms(b['dram_s'])}\n"
            f"  launches                        {ms(b['launch_s'])}\n"
            f"  not covered by any unit         {ms(b['unhidden_s'])} (tail waves, prologue/"
            f"epilogue, pipeline fill, waits)\n")


@main.command()
@click.option("--algo", "algorithm", help="standard, fa1, fa2, fa3 [fa2].")
@click.option("--no-warp-specialization", "no_ws", is_flag=True,
              help="Ablation: no producer warpgroup (FA-3).")
@click.option("--no-intra-overlap", "no_intra", is_flag=True,
              help="Ablation: no intra-warpgroup softmax/GEMM overlap (FA-3).")
@click.option("--no-pingpong", "no_pingpong", is_flag=True,
              help="Ablation: consumer warpgroups in lockstep, no ping-pong (FA-3).")
@problem_options
def run(algorithm, no_ws, no_intra, no_pingpong, fmt, output, force, model, sim_mode,
        l2_samples, **kw):
    """Analyze one attention problem with one algorithm on one GPU."""
    from .analysis.analyze import analyze
    from .report.text import analysis_table
    problem, gpu, scen, tiling = resolve(kw)
    algorithm = algorithm or scen.get("algorithm", "fa2")
    ablation = {k: False for k, off in (("warp_specialization", no_ws),
                                        ("intra_overlap", no_intra),
                                        ("pingpong", no_pingpong)) if off}
    a = analyze(problem, gpu, algorithm, model=model, sim_mode=sim_mode,
                l2_samples=l2_samples, ablation=ablation, **tiling)
    if fmt == "json":
        text = json.dumps(a.to_dict(), indent=2, sort_keys=False)
    elif fmt == "csv":
        text = to_csv([a.to_dict()])
    else:
        text = analysis_table(a) + _breakdown_lines(a)
    emit(text, output, force)


@main.command()
@click.option("--algos", default=None, help="Comma-separated algorithms [standard,fa1,fa2,fa3].")
@problem_options
def compare(algos, fmt, output, force, model, sim_mode, l2_samples, **kw):
    """Put algorithms side by side on one problem."""
    from .analysis.analyze import analyze
    from .report.text import compare_table
    problem, gpu, scen, tiling = resolve(kw)
    names = [s.strip() for s in (algos or ",".join(scen.get("algorithms", [])) or
                                 "standard,fa1,fa2,fa3").split(",") if s.strip()]
    if problem.direction != "fwd":
        names = [n for n in names if n != "fa3"] if algos is None else names
    results = [analyze(problem, gpu, n, model=model, sim_mode=sim_mode, l2_samples=l2_samples,
                       **tiling) for n in names]
    if fmt == "json":
        text = json.dumps([r.to_dict() for r in results], indent=2)
    elif fmt == "csv":
        text = to_csv([r.to_dict() for r in results])
    else:
        text = (f"{results[0].gpu.name}: {problem.describe()}\n\n" + compare_table(results))
    emit(text, output, force)





if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
