# ---
# jupyter:
#   jupytext:
#     formats: py:percent
# ---
# %% [markdown]
# # Exploring attention schedules in a notebook
#
# A percent-format script: open it as a notebook with jupytext
# (`jupytext --to notebook examples/notebook_sweep.py`), or run it as it is
# (`python examples/notebook_sweep.py [--out DIR]` writes the figures as HTML files).
# Everything here is what `iosim run`, `iosim sweep` and `iosim report` do, from Python.

# %%
import argparse
from pathlib import Path

import iosim.api as io
from iosim import plot

ap = argparse.ArgumentParser()
ap.add_argument("--out", default=None, help="folder for the figures as HTML files")
args, _ = ap.parse_known_args()

# %% [markdown]
# One analysis, as `iosim run` prints it (in Jupyter the cell shows it as a table).

# %%
a = io.run("fa2", "h100", seq=2048, heads=8)
print(a.predicted_time_s, a.bound_by)
a

# %% [markdown]
# A sweep: every algorithm at every N, as one DataFrame (the `iosim sweep` engine; pass
# `workers=2` for a local Dask cluster). The roofline model keeps this cell instant.

# %%
df = io.sweep(seqs=[512, 1024, 2048, 4096], algos=["standard", "fa1", "fa2"], gpu="h100",
              model="roofline", heads=8)
print(df[["algorithm", "problem.seq_q", "counters.l2_to_smem_bytes", "predicted_time_s"]])

# %%
figures = {
    "bytes_vs_seq": plot.bytes_vs_seq(df),
    "roofline": plot.roofline([io.run(x, "h100", model="roofline", seq=n, heads=8)
                               for x in ("fa1", "fa2") for n in (1024, 4096)]),
    "compare": plot.compare([io.run(x, "h100", seq=2048, heads=8) for x in ("fa1", "fa2")]),
    "timeline": plot.timeline(a),
    "bytes_vs_sram": plot.bytes_vs_sram(seq=1024, heads=8, gpu="h100"),
}
for name, fig in figures.items():
    print(f"{name}: {len(fig.data)} traces, title: {fig.layout.title.text}")

# %%
if args.out:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, fig in figures.items():
        fig.write_html(out / f"{name}.html", include_plotlyjs="cdn")
    print(f"wrote {len(figures)} figures to {out}")
