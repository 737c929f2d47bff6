"""`iosim teach` (the lesson) and `iosim teach online-softmax` (the recurrence by hand).
Parses and prints only; the lesson lives in the section modules."""
from __future__ import annotations

import click

from ..errors import IosimError
from ..limits import LIMITS_HELP
from ..options import GPU_OPTION, PROBLEM_OPTIONS, IosimGroup, check_output, resolve, use

# the problem fields the lesson uses (it derives the backward pass itself), shared with `run`
LESSON_FIELDS = ("batch", "heads_q", "seq_q", "head_dim", "dtype", "causal")


@click.group(cls=IosimGroup, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]},
             help="The IO complexity of attention, derived step by step with numbers iosim "
                  "computes for this GPU and problem.\n\n" + LIMITS_HELP)
@use(GPU_OPTION, PROBLEM_OPTIONS, only=LESSON_FIELDS)
@click.option("--section", help="Print one section: a number 1-8 or a name "
                                "(hierarchy, standard, online-softmax, tiling, lower-bound, "
                                "backward, exercises, decode).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False),
              help="Write the lesson as one offline HTML page with interactive figures.")
@click.option("--force", is_flag=True, help="Overwrite the --html file if it exists.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the random data in the online-softmax section.")
@click.pass_context
def teach(ctx, section, html_path, force, seed, **kw):
    if ctx.invoked_subcommand is not None:
        return
    from ..hardware import load_gpu
    from ..limits import check_problem
    from .lesson import lesson_text, resolve_section
    r = resolve(kw)
    check_problem(r.problem.with_(direction="bwd"), load_gpu(r.gpu))   # the lesson derives bwd
    sections = [resolve_section(section)] if section else None
    if html_path:
        if section:
            raise IosimError("--section and --html do not combine: the page holds every section")
        check_output(html_path, force, flag="--html")
        from .html import write_html
        write_html(html_path, r.problem, r.gpu, force=force, seed=seed)
        click.echo(f"wrote {html_path}", err=True)
        return
    click.echo(lesson_text(r.problem, r.gpu, sections, seed, progress=True).rstrip("\n"))


@teach.command("online-softmax")
@click.option("--scores", default="1,3,4,2", show_default=True,
              help="Comma-separated scores of one query row.")
@click.option("--values", default="1,2,3,4", show_default=True,
              help="Comma-separated values, one per score.")
@click.option("--block", type=int, default=2, show_default=True, help="Keys per block.")
def online_softmax_cmd(scores, values, block):
    """Run the online-softmax recurrence by hand: (m, ℓ, o) and α after each block."""
    import numpy as np

    from .online_softmax import parse_floats, walkthrough, walkthrough_text
    s, v = parse_floats(scores, "scores"), parse_floats(values, "values")
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
            w = walkthrough(s, v, block)
            text = walkthrough_text(w)
    except FloatingPointError:
        raise IosimError("--scores/--values overflow float64 in the recurrence (sums of "
                         "exp-weighted values beyond ~1.8e308); use smaller magnitudes") from None
    click.echo(text)
