"""The issue-5 validation sweep on a GPU: time every configuration (CUDA events, median), and
optionally read Nsight Compute byte counters, into one CSV.

    python3 -m iosim.measure.sweep time  OUT.csv            # timings
    ncu ... python3 -m iosim.measure.sweep ncu-target       # (run by `ncu` mode)
    python3 -m iosim.measure.sweep ncu   TIMES.csv OUT.csv RAW.txt [KERNELS.csv]
                                          # add ncu bytes to TIMES.csv; per-kernel rows

IOSIM_SWEEP (environment) names another sweep YAML (`iosim measure` writes a one-config one).

Configurations: `configs()` below (N 512..32768, d 64 and 128, causal and not; iosim's
standard / fa1 / fa2 kernels and torch SDPA's flash and cuDNN back ends; fwd and bwd)."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

from ..problem import AttentionProblem

from ..paths import VALIDATION_DIR

SWEEP = VALIDATION_DIR / "sweep.yaml"


def configs(path: Path | None = None) -> list:
    """The sweep's configurations (iosim/data/validation/sweep.yaml), each with `runner`: the
    iosim algorithm whose kernels run (impl iosim) or the torch back end (torch_flash/cudnn)."""
    import yaml
    path = Path(path or os.environ.get("IOSIM_SWEEP") or SWEEP)
    out = []
    for k, c in enumerate(yaml.safe_load(Path(path).read_text())["configs"]):
        c = dict(c)
        c.setdefault("heads_kv", c["heads_q"])
        c.setdefault("seq_kv", c["seq_q"])
        c["config"] = k
        c["runner"] = c["algorithm"] if c["impl"] == "iosim" else c["impl"]
        out.append(c)
    return out


KV_CACHE_KEYS = ("seq_kv_list", "prefix_len", "page_size", "page_layout")   # decode rows


def problem_of(c) -> AttentionProblem:
    return AttentionProblem(**{k: c[k] for k in ("batch", "heads_q", "heads_kv", "seq_q", "seq_kv",
                                                 "head_dim", "dtype", "causal", "direction")},
                            **{k: c[k] for k in KV_CACHE_KEYS if k in c})


def make_op(c, n_sets):
    """(op(k), schedule or None) for one configuration."""
    p = problem_of(c)
    if c["runner"].startswith("torch"):
        from iosim.measure.torch_sdpa import make_op as torch_op
        return torch_op(p, c["runner"], n_sets), None
    import numpy as np
    from iosim.algorithms import build_schedule
    from iosim.kernels.reference import random_inputs
    from iosim.kernels.run import Launcher, device_inputs, forward_schedule, run_schedule

    rng = np.random.default_rng(c["config"])
    sets = []
    for _ in range(n_sets):
        T = device_inputs(random_inputs(p, rng, with_grad=p.direction != "fwd"), p.dtype)
        if p.direction != "fwd":
            run_schedule(forward_schedule(p, "fa2"), T)
        sets.append(T)
    sched = build_schedule(p, "h200", c["runner"])
    ln = Launcher(sched)
    return (lambda k: ln.run(sets[k])), sched


def bytes_per_set(p) -> int:
    return p.q_bytes() * (2 if p.direction == "fwd" else 4) + p.kv_bytes() * (1 if p.direction == "fwd" else 2)


FIELDS = ["id", "impl", "config", "algorithm", "direction", "batch", "heads_q", "heads_kv", "seq_q", "seq_kv",
          "head_dim", "dtype", "causal", "block_q", "block_kv", "stages", "warps", "time_s",
          "time_min_s", "time_max_s", "runs", "input_sets", "useful_flops", "tflops",
          "dram_read_bytes", "dram_write_bytes", "l2_to_sm_read_bytes", "lts_bytes", "ncu_time_s",
          "kernels"]


def run_time(path: str, runners: list | None = None) -> None:
    from iosim.measure.timing import sets_to_defeat_l2, time_op
    rows = []
    for c in configs():
        if runners and c["runner"] not in runners:
            continue
        p = problem_of(c)
        n_sets = sets_to_defeat_l2(bytes_per_set(p), most=4)
        row = dict(c)
        try:
            op, sched = make_op(c, n_sets)
            if op is None:
                print(f"config {c['config']}: {c['runner']} refused", flush=True)
                continue
            rep = 10 if c["runner"] != "fa1" else 5
            row.update(time_op(op, n_sets, warmup=2, repeat=rep))
            if sched is not None:
                t = sched.tiling["bwd" if p.direction == "bwd" else "fwd"]
                row.update(block_q=t.block_q, block_kv=t.block_kv, stages=t.stages, warps=t.warps)
        except Exception as exc:   # one config failing must not lose the sweep
            print(f"config {c['config']} failed: {type(exc).__name__}: {exc}", flush=True)
            continue
        row["useful_flops"] = p.useful_flops()
        row["tflops"] = p.useful_flops() / row["time_s"] / 1e12
        rows.append(row)
        write(path, rows)            # after every row: a cut-short run keeps what it measured
        print(f"{c['config']:3d} {c['runner']:12s} {c['direction']} N={c['seq_q']:6d} d={c['head_dim']} "
              f"causal={int(c['causal'])} {row['time_s']*1e3:9.3f} ms {row['tflops']:7.1f} TFLOP/s", flush=True)
        import gc
        del op
        gc.collect()
        try:
            import cupy as cp
            cp.get_default_memory_pool().free_all_blocks()
        except ImportError:
            pass
    write(path, rows)


def write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


def run_ncu_target(only: list | None = None) -> None:
    """Run each configuration once between cudaProfilerStart/Stop, after a marker kernel."""
    import cupy as cp
    from iosim.measure.ncu import marker
    for c in configs():
        if only is not None and c["config"] not in only:
            continue
        try:
            op, _ = make_op(c, 1)
        except Exception as exc:
            print(f"config {c['config']} failed: {exc}", flush=True)
            op = None
        if op is None:
            continue
        op(0)                                    # warm-up (compiles), not profiled
        cp.cuda.runtime.deviceSynchronize()
        cp.cuda.profiler.start()
        marker()
        op(0)
        cp.cuda.runtime.deviceSynchronize()
        cp.cuda.profiler.stop()
        print(f"ncu-target: config {c['config']} done", flush=True)
        del op
        cp.get_default_memory_pool().free_all_blocks()


def run_ncu(times_csv: str, out_csv: str, raw_out: str, kernels_csv: str | None = None) -> None:
    """Profile every timed configuration in one ncu run; OUT.csv = TIMES.csv plus ncu's
    counters summed per configuration, KERNELS.csv (if named) = one row per kernel."""
    from iosim.measure.ncu import KERNEL_FIELDS, kernel_rows, ncu_command, parse_csv, split_by_marker, totals
    rows = list(csv.DictReader(open(times_csv)))
    ids = [int(r["config"]) for r in rows]
    cmd = ncu_command(["-m", "iosim.measure.sweep", "ncu-target", ",".join(map(str, ids))])
    cmd.insert(1, "--profile-from-start")
    cmd.insert(2, "off")
    res = subprocess.run(cmd, capture_output=True, text=True)
    Path(raw_out).write_text(res.stdout + "\n#STDERR\n" + res.stderr)
    groups = split_by_marker(parse_csv(res.stdout))
    print(f"ncu: {len(groups)} configurations profiled for {len(rows)} timed (rc {res.returncode})", flush=True)
    per_kernel = []
    for r, g in zip(rows, groups):
        r.update(totals(g))
        per_kernel += kernel_rows(r["id"], g)
    if len(groups) != len(rows):
        print("ncu: WARNING configuration count mismatch; bytes left blank where unmatched", flush=True)
    write(out_csv, rows)
    if kernels_csv:
        with open(kernels_csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=KERNEL_FIELDS)
            w.writeheader()
            w.writerows(per_kernel)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "time":
        run_time(sys.argv[2], sys.argv[3].split(",") if len(sys.argv) > 3 else None)
    elif mode == "ncu-target":
        run_ncu_target([int(x) for x in sys.argv[2].split(",")] if len(sys.argv) > 2 else None)
    elif mode == "ncu":
        run_ncu(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "ncu_raw.txt",
                sys.argv[5] if len(sys.argv) > 5 else None)
