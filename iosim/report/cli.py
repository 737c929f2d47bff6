"""`iosim report`: the HTML report command (registered by iosim.cli automatically)."""
from __future__ import annotations

import shlex
from pathlib import Path

import click

from ..cli import PROBLEM_DEFAULTS, TILING_KEYS
from ..errors import IosimError

DEFAULT_SEQ = "1024..65536"
DEFAULT_ALGOS = "standard,fa1,fa2,fa3"

# (option declarations, kwargs) in the order the reproduce command lists them
OPTIONS = [
    (("--scenario",), dict(help="Named scenario (iosim scenarios lists them) or a YAML path; its seq_range "
                                "and algorithms apply; other options override its fields.")),
    (("--gpu",), dict(help="a100, h100, h200, or a GPU YAML path [h100].")),
    (("--seq",), dict(help=f"Sequence lengths: A..B (powers of two from A to B), a comma list, "
                           f"or one N [{DEFAULT_SEQ}].")),
    (("--algos",), dict(help=f"Comma-separated algorithms [{DEFAULT_ALGOS}].")),
    (("--compare-seq",), dict(type=int, help="N of the side-by-side comparison, the SRAM sweep "
                                             "and the timeline [the middle of --seq].")),
    (("--batch",), dict(type=int, help="Batch size [1].")),
    (("--heads", "heads_q"), dict(type=int, help="Query heads [32].")),
    (("--kv-heads", "heads_kv"), dict(type=int, help="KV heads (GQA/MQA) [= heads].")),
    (("--head-dim", "head_dim"), dict(type=int, help="Head dimension [128].")),
    (("--dtype",), dict(type=click.Choice(["fp16", "bf16", "fp8"]), help="[fp16]")),
    (("--causal/--no-causal",), dict(default=None, help="Causal mask [no].")),
    (("--direction",), dict(type=click.Choice(["fwd", "bwd", "fwd+bwd"]), help="[fwd]")),
    (("--block-q",), dict(type=int, help="Override the Q (row) block size.")),
    (("--block-kv",), dict(type=int, help="Override the KV (column) block size.")),
    (("--stages",), dict(type=int, help="Override the pipeline depth.")),
    (("--warps",), dict(type=int, help="Override warps per CTA.")),
    (("--model",), dict(type=click.Choice(["sim", "roofline"]), default="sim", show_default=True,
                        help="Time model (sim falls back to roofline without the simulator).")),
    (("--sim-max-ctas",), dict(type=int, default=250_000, show_default=True,
                               help="Schedules with more CTAs use the roofline model "
                                    "(simulating millions of CTAs takes minutes).")),
    (("--mode", "sim_mode"), dict(type=click.Choice(["fast", "exact"]), default="fast",
                                  show_default=True, help="Simulator mode.")),
    (("-o", "--output"), dict(type=click.Path(dir_okay=False), required=True,
                              help="The HTML file to write.")),
    (("--force",), dict(is_flag=True, help="Overwrite --output if it exists.")),
    (("--decode",), dict(is_flag=True, help="Write the decode page instead: time vs KV length "
                                            "for fa2 and flash-decoding, KV bytes vs GQA group "
                                            "and page size (iosim/report/decode.py).")),
    (("--progress/--no-progress",), dict(default=True, help="Progress bar on stderr [on].")),
]
NOT_IN_COMMAND = {"force", "progress"}   # they do not change the page


def report_options(f):
    for decls, kw in reversed(OPTIONS):
        f = click.option(*decls, **kw)(f)
    return f


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
    from ..problem import AttentionProblem
    from ..scenarios import load_scenario
    from .sweep import available_algorithms, default_compare_seq, parse_seq_range
    scen = load_scenario(kw["scenario"]) if kw.get("scenario") else {}
    seq_text = kw.get("seq") or scen.get("seq_range") or DEFAULT_SEQ
    seqs = parse_seq_range(seq_text)
    fields = {}
    for key, default in PROBLEM_DEFAULTS.items():
        if key in ("seq_q", "seq_kv"):
            continue
        value = kw.get(key)
        fields[key] = value if value is not None else scen.get(key, default)
    problem = AttentionProblem(**fields, seq_q=seqs[0], seq_kv=seqs[0])
    gpu = load_gpu(kw.get("gpu") or scen.get("gpu") or "h100")
    algos_text = kw.get("algos") or ",".join(scen.get("algorithms", [])) or DEFAULT_ALGOS
    algos = list(dict.fromkeys(a.strip() for a in algos_text.split(",") if a.strip()))
    known = available_algorithms()
    unknown = [a for a in algos if a not in known]
    if unknown or not algos:
        raise IosimError(f"unknown algorithm(s) {', '.join(unknown) or '(none given)'}; "
                         f"choose from: {', '.join(known)}")
    compare = kw.get("compare_seq") or (scen["seq_q"] if scen.get("seq_q") in seqs else
                                        default_compare_seq(seqs))
    if compare not in seqs:
        raise IosimError(f"--compare-seq {compare} is not one of the swept N: "
                         + ", ".join(map(str, seqs)))
    tiling = {k: kw.get(k) if kw.get(k) is not None else scen.get(k) for k in TILING_KEYS}
    return dict(problem=problem, gpu=gpu, algorithms=algos, seqs=seqs, compare_seq=compare,
                tiling={k: v for k, v in tiling.items() if v is not None})


@click.command("report")
@report_options
@click.pass_context
def report(ctx, output, force, progress, model, sim_mode, sim_max_ctas, decode=False, **kw):
    """Write one self-contained HTML report: roofline, bytes vs N and vs SRAM size,
    algorithms side by side, CTA timelines."""
    import time

    from .page import ReportSpec, build_report
    path = Path(output)
    if path.exists() and not force:
        raise IosimError(f"{output} exists; pass --force to overwrite it")
    r = resolve_report(kw)
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
