"""`iosim measure`: time one configuration on the GPU (CUDA events) and, with --ncu, read its
Nsight Compute byte counters. Writes one CSV row like iosim/data/validation/measured_h200.csv."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from ..errors import IosimError


@click.command()
@click.option("--algo", "algorithm", default="fa2", show_default=True,
              type=click.Choice(["standard", "fa1", "fa2", "fa3"]),
              help="iosim kernels to run, or (with --impl torch_*) the schedule describing torch.")
@click.option("--impl", default="iosim", show_default=True,
              type=click.Choice(["iosim", "torch_flash", "torch_cudnn"]))
@click.option("--batch", type=int, default=1, show_default=True)
@click.option("--heads", "heads_q", type=int, default=32, show_default=True)
@click.option("--kv-heads", "heads_kv", type=int)
@click.option("--seq", "seq_q", type=int, default=4096, show_default=True)
@click.option("--seq-kv", "seq_kv", type=int)
@click.option("--head-dim", "head_dim", type=int, default=128, show_default=True)
@click.option("--dtype", type=click.Choice(["fp16", "bf16"]), default="fp16", show_default=True)
@click.option("--causal/--no-causal", default=False)
@click.option("--direction", type=click.Choice(["fwd", "bwd"]), default="fwd", show_default=True)
@click.option("--ncu", is_flag=True, help="Also read DRAM / L2 byte counters with Nsight Compute.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="CSV to write [stdout].")
@click.option("--force", is_flag=True)
def measure(algorithm, impl, ncu, output, force, **fields):
    """Time a kernel (GPU): median of CUDA-event timings with inputs rotated past L2."""
    import yaml
    from ..problem import AttentionProblem
    if output and Path(output).exists() and not force:
        raise IosimError(f"{output} exists; pass --force to overwrite it")
    p = AttentionProblem(**fields)
    cfg = dict(id=f"{impl}-{algorithm}-{p.direction}-N{p.seq_q}-d{p.head_dim}", impl=impl,
               algorithm=algorithm, **p.to_dict())
    try:
        import cupy  # noqa: F401  (only: is a GPU stack here?)
    except ImportError:
        raise IosimError("measure needs cupy and an NVIDIA GPU") from None
    from . import sweep
    with tempfile.TemporaryDirectory() as tmp:
        sweep_yaml = Path(tmp) / "sweep.yaml"
        sweep_yaml.write_text(yaml.safe_dump({"configs": [cfg]}))
        os.environ["IOSIM_SWEEP"] = str(sweep_yaml)
        times = Path(tmp) / "times.csv"
        sweep.run_time(str(times))
        result = times
        if ncu:
            result = Path(tmp) / "measured.csv"
            sweep.run_ncu(str(times), str(result), str(Path(tmp) / "ncu_raw.txt"))
        text = result.read_text()
    if output:
        Path(output).write_text(text)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text.rstrip("\n"))
