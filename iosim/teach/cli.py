"""`iosim teach` (the lesson) and `iosim teach online-softmax` (the recurrence by hand).
Parses and prints only; the lesson lives in the section modules."""
from __future__ import annotations

import click

from ..cli import IosimGroup
from ..errors import IosimError


@click.group(cls=IosimGroup, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--gpu", default="h100", show_default=True, help="a100, h100, h200, or a YAML path.")
@click.option("--seq", "seq", type=int, default=4096, show_default=True, help="Sequence length N.")
@click.option("--head-dim", "head_dim", type=int, default=128, show_default=True)
@click.option("--heads", type=int, default=32, show_default=True)
@click.option("--batch", type=int, default=1, show_default=True)
@click.option("--dtype", type=click.Choice(["fp16", "bf16", "fp8"]), default="fp16",
              show_default=True)
@click.option("--causal/--no-causal", default=False, show_default=True)
@click.option("--section", help="Print one section: a number 1-8 or a name "
                                "(hierarchy, standard, online-softmax, tiling, lower-bound, "
                                "backward, exercises, decode).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False),
              help="Write the lesson as one offline HTML page with interactive figures.")
@click.option("--force", is_flag=True, help="Overwrite the --html file if it exists.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the random data in the online-softmax section.")
@click.pass_context
def teach(ctx, gpu, seq, head_dim, heads, batch, dtype, causal, section, html_path, force, seed):
    """The IO complexity of attention, derived step by step with numbers iosim computes for
    this GPU and problem."""
    if ctx.invoked_subcommand is not None:
        return
    from ..problem import AttentionProblem
    from .lesson import lesson_text, resolve_section
    problem = AttentionProblem(batch=batch, heads_q=heads, seq_q=seq, head_dim=head_dim,
                               dtype=dtype, causal=causal)
    if html_path:
        if section:
            raise IosimError("--section and --html do not combine: the page holds every section")
        from .html import write_html
        write_html(html_path, problem, gpu, force=force, seed=seed)
        click.echo(f"wrote {html_path}", err=True)
        return
    sections = [resolve_section(section)] if section else None
    click.echo(lesson_text(problem, gpu, sections, seed).rstrip("\n"))


@teach.command("online-softmax")
@click.option("--scores", default="1,3,4,2", show_default=True,
              help="Comma-separated scores of one query row.")
@click.option("--values", default="1,2,3,4", show_default=True,
              help="Comma-separated values, one per score.")
@click.option("--block", type=int, default=2, show_default=True, help="Keys per block.")
def online_softmax_cmd(scores, values, block):
    """Run the online-softmax recurrence by hand: (m, ℓ, o) and α after each block."""
    from .online_softmax import parse_floats, walkthrough, walkthrough_text
    w = walkthrough(parse_floats(scores, "scores"), parse_floats(values, "values"), block)
    click.echo(walkthrough_text(w))
