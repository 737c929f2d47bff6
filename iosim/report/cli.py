"""`iosim report`: the HTML report command (registered by iosim.cli automatically)."""
from __future__ import annotations

import shlex
from pathlib import Path

import click

from ..errors import IosimError
from ..limits import LIMITS_HELP, LimitError, MAX_SIM_CTAS
from ..options import (ALGOS_OPTION, GPU_OPTION, MODEL_OPTIONS, PROBLEM_OPTIONS, SCENARIO_OPTION,
                       SEQ_LIST_HELP, TILING_OPTIONS, algorithm_list, check_output, option,
                       parse_seq_list, use)

DEFAULT_SEQ = "1024..65536"

# the shared options (options.py), in the order the reproduce command lists them; the report
# sweeps N (seq_q = seq_kv = N) and writes HTML only
report_options = use(
    SCENARIO_OPTION, GPU_OPTION,
    option("--seq", help=f"Sequence lengths: {SEQ_LIST_HELP} [{DEFAULT_SEQ}]."),
    ALGOS_OPTION,
    option("--compare-seq", type=click.IntRange(min=1),
           help="N of the side-by-side comparison, the SRAM sweep and the timeline, one of "
                "the swept N [the middle of --seq]."),
    PROBLEM_OPTIONS, TILING_OPTIONS,
    {k: v for k, v in MODEL_OPTIONS.items() if k == "model"},
    option("--sim-max-ctas", type=click.IntRange(0, MAX_SIM_CTAS), default=250_000,
           show_default=True,
           help="Schedules with more CTAs use the roofline model (simulating millions of CTAs "
                f"takes minutes); at most {MAX_SIM_CTAS:,}."),
    {k: v for k, v in MODEL_OPTIONS.items() if k == "sim_mode"},
    option("-o", "--output", type=click.Path(dir_okay=False), required=True,
           help="The HTML file to write."),
    option("--force", is_flag=True, help="Overwrite --output if it exists."),
    option("--decode", is_flag=True,
           help="Write the decode page instead: time vs KV length for fa2 and flash-decoding, "
                "KV bytes vs GQA group and page size (iosim/report/decode.py)."),
    option("--progress/--no-progress", default=True, help="Progress bar on stderr [on]."),
    only=("batch", "heads_q", "heads_kv", "head_dim", "dtype", "causal", "direction",
          "block_q", "block_kv", "stages", "warps", "model", "sim_mode"))
NOT_IN_COMMAND = {"force", "progress"}   # they do not change the page


def reproduce_command(ctx: click.Context) -> str:
    """`iosim report` with every option the user gave (in a fixed order), quoted for a shell."""
    words = ["iosim", "report"]
    for param in ctx.command.params:
        name = param.name
        if name in NOT_IN_COMMAND:
            continue
        src = ctx.get_parameter_source(name)
        if src is None or src.name not in ("COMMANDLINE", "ENVIRONMENT"):
            continue
        value = ctx.params[name]
        if isinstance(param, click.Option) and param.is_bool_flag:
            words.append(param.opts[0] if value else param.secondary_opts[0])
        else:
            opt = max(param.opts, key=len)
            words += [opt, str(value)]
    return shlex.join(words)


def resolve_report(kw: dict) -> dict:
    """Problem, GPU, algorithms, N values and tiling from the options and the scenario."""
    from ..hardware import load_gpu
    from ..options import resolve
    from .sweep import default_compare_seq
    r = resolve({k: v for k, v in kw.items() if k != "seq"}, seq_q=1, seq_kv=1)
    seqs = parse_seq_list(kw.get("seq") or r.scenario.get("seq_range") or DEFAULT_SEQ)
    problem = r.problem.with_(seq_q=seqs[0], seq_kv=seqs[0])
    gpu = load_gpu(r.gpu)
    algos = algorithm_list(kw.get("algos"), r.scenario)
    scen_seq = r.scenario.get("seq_q")
    compare = kw.get("compare_seq")
    if compare is None:
        compare = scen_seq if scen_seq in seqs else default_compare_seq(seqs)
    if compare not in seqs:
        raise IosimError(f"--compare-seq {compare} is not one of the swept N: "
                         + ", ".join(map(str, seqs)))
    return dict(problem=problem, gpu=gpu, algorithms=algos, seqs=seqs, compare_seq=compare,
                tiling=r.tiling)


def check_report_limits(r: dict, model: str, sim_mode: str, sim_max_ctas: int) -> None:
    """Refuse, before any work, a report with a point beyond a size limit (docs/limits.md).
    A tiling that does not fit one algorithm is not refused: its panels say so."""
    from ..limits import check_schedule, preflight, schedule_size
    for n in r["seqs"]:
        p = r["problem"].with_(seq_q=n, seq_kv=n)
        for algo in r["algorithms"]:
            try:
                schedule = preflight(p, r["gpu"], algo, **r["tiling"])
            except LimitError:
                raise
            except IosimError:
                continue
            if model == "sim" and schedule_size(schedule)["ctas"] <= sim_max_ctas:
                check_schedule(schedule, model, sim_mode)   # larger ones use the roofline


@click.command("report", help="Write one self-contained HTML report: roofline, bytes vs N and "
                               "vs SRAM size, algorithms side by side, CTA timelines.\n\n"
                               + LIMITS_HELP)
@report_options
@click.pass_context
def report(ctx, output, force, progress, model, sim_mode, sim_max_ctas, decode=False, **kw):
    import time

    from .page import ReportSpec, build_report
    path = Path(output)
    check_output(output, force)
    r = resolve_report(kw)
    if not decode:
        check_report_limits(r, model, sim_mode, sim_max_ctas)
    t0 = time.perf_counter()
    if decode:
        from .decode import build_decode_report
        text = build_decode_report(r["problem"], r["gpu"], model, reproduce_command(ctx))
    else:
        spec = ReportSpec(model=model, sim_mode=sim_mode, command=reproduce_command(ctx),
                          sim_max_ctas=sim_max_ctas, **r)
        text = build_report(spec, progress=progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    click.echo(f"wrote {output} ({len(text.encode('utf-8')) / 1e6:.2f} MB, "
               f"{time.perf_counter() - t0:.1f} s)", err=True)
