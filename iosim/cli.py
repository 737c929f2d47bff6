"""Command-line interface: parses options and prints; the work lives in importable modules."""
from __future__ import annotations

import json
import sys

import click

from .errors import IosimError
from .limits import LIMITS_HELP, preflight
from .options import (ALGO_OPTION, ALGOS_OPTION, IosimGroup, algorithm_list, check_output,
                      problem_options, resolve, say_warnings, use, write_output)
from .options import algorithm as pick_algorithm
from .records import to_csv


# Commands that live with their subsystems; imported only when used, so `iosim run` starts fast.
LAZY_COMMANDS = {
    "capture": ("iosim.kernels.cli", "capture"),
    "measure": ("iosim.measure.cli", "measure"),
    "calibrate": ("iosim.measure.calibrate", "calibrate"),
    "validate": ("iosim.analysis.validate", "validate"),
    "report": ("iosim.report.cli", "report"),
    "teach": ("iosim.teach.cli", "teach"),
    "sweep": ("iosim.sweep.cli", "sweep"),
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


@main.command(help="Analyze one attention problem with one algorithm on one GPU.\n\n" + LIMITS_HELP)
@use(ALGO_OPTION)
@click.option("--timeline", type=click.Path(dir_okay=False),
              help="Also write the simulated CTA timeline here as Chrome/Perfetto trace-event "
                   "JSON (open it in ui.perfetto.dev).")
@click.option("--no-warp-specialization", "no_ws", is_flag=True,
              help="Ablation: no producer warpgroup (FA-3).")
@click.option("--no-intra-overlap", "no_intra", is_flag=True,
              help="Ablation: no intra-warpgroup softmax/GEMM overlap (FA-3).")
@click.option("--no-pingpong", "no_pingpong", is_flag=True,
              help="Ablation: consumer warpgroups in lockstep, no ping-pong (FA-3).")
@problem_options
def run(algorithm, timeline, no_ws, no_intra, no_pingpong, fmt, output, force, model, sim_mode,
        l2_samples, **kw):
    from .analysis.analyze import analyze
    from .report.text import analysis_table
    check_output(output, force)
    if timeline:
        check_output(timeline, force, flag="--timeline")
        if model != "sim":
            raise IosimError("--timeline needs the simulator (--model sim)")
    r = resolve(kw)
    name = pick_algorithm(algorithm, r.scenario)
    if r.tiling.get("splits") is not None and not name.startswith("flash-decoding"):
        raise IosimError(f"--splits applies to flash-decoding, not {name}")
    if r.tiling.get("gemm_tiles") is not None and name != "standard":
        raise IosimError(f"--gemm-tiles applies to standard attention, not {name}")
    ablation = {k: False for k, off in (("warp_specialization", no_ws),
                                        ("intra_overlap", no_intra),
                                        ("pingpong", no_pingpong)) if off}
    a = analyze(r.problem, r.gpu, name, model=model, sim_mode=sim_mode,
                l2_samples=l2_samples, ablation=ablation, **r.tiling)
    say_warnings(r.problem)                           # only once the input is accepted
    if fmt == "json":
        text = json.dumps(a.to_dict(), indent=2, sort_keys=False)
    elif fmt == "csv":
        text = to_csv([a.to_dict()])
    else:
        text = analysis_table(a)
    doc = None
    if timeline:
        from .report import trace_events
        doc = trace_events.simulation_trace(a)
    write_output(text, output, force)
    if doc is not None:                  # after the output: a refused --output writes nothing
        trace_events.write(doc, timeline)
        click.echo(f"wrote {timeline}", err=True)


@main.command(help="Put algorithms side by side on one problem.\n\n" + LIMITS_HELP)
@use(ALGOS_OPTION)
@problem_options
def compare(algos, fmt, output, force, model, sim_mode, l2_samples, **kw):
    from .analysis.analyze import analyze_each
    from .report.text import compare_table
    check_output(output, force)
    r = resolve(kw)
    names = algorithm_list(algos, r.scenario)
    if r.problem.direction != "fwd" and algos is None:
        names = [n for n in names if n != "fa3"]      # FA-3 is forward only
    for n in names:                                   # every algorithm checked before any runs
        preflight(r.problem, r.gpu, n, model, sim_mode, **r.tiling)
    from .progress import Progress
    bar = Progress(len(names), desc="compare", delay=2.0)   # quiet unless it takes a while
    results = analyze_each(r.problem, r.gpu, names, on_done=bar.step, model=model,
                           sim_mode=sim_mode, l2_samples=l2_samples, tiling=r.tiling)
    bar.close()
    say_warnings(r.problem)                           # only once the input is accepted
    if fmt == "json":
        text = json.dumps([x.to_dict() for x in results], indent=2)
    elif fmt == "csv":
        text = to_csv([x.to_dict() for x in results])
    else:
        text = (f"{results[0].gpu.name}: {r.problem.describe()}\n\n" + compare_table(results))
    write_output(text, output, force)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
