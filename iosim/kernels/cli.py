"""`iosim capture`: run a kernel in trace mode on the GPU and write its Trace (JSON)."""
from __future__ import annotations

import click

from ..errors import IosimError


@click.command()
@click.option("--algo", "algorithm", default="fa2", show_default=True,
              type=click.Choice(["standard", "fa1", "fa2", "fa3"]))
@click.option("--batch", type=int, default=1, show_default=True)
@click.option("--heads", "heads_q", type=int, default=2, show_default=True)
@click.option("--kv-heads", "heads_kv", type=int)
@click.option("--seq", "seq_q", type=int, default=1024, show_default=True)
@click.option("--seq-kv", "seq_kv", type=int)
@click.option("--head-dim", "head_dim", type=int, default=128, show_default=True)
@click.option("--dtype", type=click.Choice(["fp16", "bf16"]), default="fp16", show_default=True)
@click.option("--causal/--no-causal", default=False)
@click.option("--direction", type=click.Choice(["fwd", "bwd"]), default="fwd", show_default=True)
@click.option("--block-q", type=int)
@click.option("--block-kv", type=int)
@click.option("--stages", type=int)
@click.option("--warps", type=int)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="The trace to write (iosim-trace-1 JSON); needed unless --from-trace.")
@click.option("--timeline", type=click.Path(dir_okay=False),
              help="Also write the trace as Chrome/Perfetto trace-event JSON, laid out like "
                   "`iosim run --timeline`.")
@click.option("--from-trace", "from_trace", type=click.Path(dir_okay=False, exists=True),
              help="Convert this captured trace (no GPU needed) instead of capturing: "
                   "with --timeline.")
@click.option("--force", is_flag=True, help="Overwrite the output if it exists.")
def capture(algorithm, output, timeline, from_trace, force, seed, block_q, block_kv, stages,
            warps, **fields):
    """Run a kernel in trace mode (GPU) and write the trace; check it against the schedule."""
    from pathlib import Path
    from ..algorithms import build_schedule
    from ..problem import AttentionProblem
    from ..report import trace_events
    for path in (output, timeline):
        if path and Path(path).exists() and not force:
            raise IosimError(f"{path} exists; pass --force to overwrite it")
    if from_trace:
        if not timeline:
            raise IosimError("--from-trace converts a trace: give --timeline FILE.json")
        from .trace import Trace
        try:
            trace = Trace.load(from_trace)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise IosimError(f"{from_trace} is not an iosim trace: {exc}") from None
        trace_events.write(trace_events.capture_trace(trace), timeline)
        click.echo(f"wrote {timeline}")
        return
    if not output:
        raise IosimError("give -o/--output (the trace to write)")
    problem = AttentionProblem(**fields)
    tiling = {k: v for k, v in dict(block_q=block_q, block_kv=block_kv, stages=stages,
                                    warps=warps).items() if v is not None}
    schedule = build_schedule(problem, "h200", algorithm, **tiling)   # refuses bad tilings early
    try:
        from .run import capture as run_capture
        trace = run_capture(problem, algorithm, "h200", seed=seed, **tiling)
    except ImportError:
        raise IosimError("capture needs cupy and an NVIDIA GPU") from None
    from .trace import compare_trace
    import sys
    trace.command = "iosim capture " + " ".join(sys.argv[1:][1:] if sys.argv[1:2] == ["capture"] else sys.argv[1:])
    trace.save(output)
    if timeline:
        trace_events.write(trace_events.capture_trace(trace), timeline)
    mismatches = compare_trace(schedule, trace)
    click.echo(f"wrote {output}: {sum(len(k.ctas) for k in trace.kernels)} CTAs traced; "
               + ("equal to the schedule" if not mismatches else f"{len(mismatches)} mismatches:"))
    for m in mismatches:
        click.echo(f"  {m}")
