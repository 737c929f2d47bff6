"""`iosim calibrate`: microbenchmark a GPU and write a calibrated GpuSpec YAML.

On the GPU machine, `iosim calibrate -o results.json` runs the microbenchmarks
(iosim.measure.microbench). Anywhere, `iosim calibrate --from-json results.json` writes
iosim/data/gpus/<base>-calibrated.yaml: the base config with each measured figure replaced and
its source saying how it was measured.
"""
from __future__ import annotations

import json
from pathlib import Path

import click
import yaml

from ..errors import IosimError

FIGURES = [  # (config key, json section, json key)
    ("dram_bandwidth_bytes_per_s", "dram", "dram_bandwidth_bytes_per_s"),
    ("l2_bandwidth_bytes_per_s", "l2", "l2_bandwidth_bytes_per_s"),
    ("exp_per_clock_per_sm", "exp", "exp_per_clock_per_sm"),
    ("launch_overhead_s", "launch", "launch_overhead_s"),
]


def _clock_figures(cfg: dict, clocks: dict, where: str) -> None:
    """Per-clock tensor rates and the power-capped clock line from iosim.measure.clocks."""
    sm = cfg["sm_count"]
    gemm = clocks["cublas_gemm_fp16_8192"]
    per_clock = gemm["flops_per_s"] / (gemm["sm_clock_mhz_median"] * 1e6 * sm)
    peak = cfg["tensor_flops_per_s"]
    achievable = per_clock * sm * cfg["clock_hz"]
    scale = achievable / peak["fp16"]
    cfg["tensor_flops_per_s_achievable"] = {
        dt: (float(f"{v * scale:.4g}") if v is not None else None) for dt, v in peak.items()}
    cfg["sources"]["tensor_flops_per_s_achievable"] = (
        f"{where}: cuBLAS fp16 8192^3 GEMM {gemm['flops_per_s'] / 1e12:.1f} TFLOP/s while nvidia-smi "
        f"read a median SM clock of {gemm['sm_clock_mhz_median']:.1f} MHz: {per_clock:.0f} FLOP/clk/SM, "
        f"given here at clock_hz (the clock model lowers it under load: power_capped_clock); "
        f"other dtypes at the datasheet ratios (iosim calibrate --clocks)")
    ms = clocks.get("mma_sync_bound")
    if ms and "tensor_flops_per_s" in ms:
        ms_per_clock = ms["tensor_flops_per_s"] / (ms["sm_clock_mhz_median"] * 1e6 * sm)
        cfg["tensor_mma_sync_fraction"] = float(f"{min(1.0, ms_per_clock / per_clock):.4g}")
        cfg["sources"]["tensor_mma_sync_fraction"] = (
            f"{where}: {ms['method']}: {ms['tensor_flops_per_s'] / 1e12:.1f} TFLOP/s at a median "
            f"{ms['sm_clock_mhz_median']:.0f} MHz ({ms['power_w_median']:.0f} W): "
            f"{ms_per_clock:.0f} FLOP/clk/SM over the GEMM's {per_clock:.0f} (iosim calibrate --clocks)")
    loads = {k: v for k, v in clocks.items() if isinstance(v, dict) and v.get("flops_per_s")
             and v.get("power_w_median")}
    top = max(v["power_w_median"] for v in loads.values())
    capped = {k: v for k, v in loads.items() if v["power_w_median"] >= 0.97 * top}
    if len(capped) >= 2:
        import numpy as np
        r = np.array([v["flops_per_s"] for v in capped.values()])
        f = np.array([v["sm_clock_mhz_median"] * 1e6 for v in capped.values()])
        slope, intercept = np.polyfit(r, f, 1)
        cfg["power_capped_clock"] = {
            "clock_at_zero_tensor_rate_hz": float(f"{intercept:.4g}"),
            "clock_drop_hz_per_tensor_flop_per_s": float(f"{max(0.0, -slope):.4g}")}
        pts = ", ".join(f"{k} {v['flops_per_s'] / 1e12:.0f} TFLOP/s at {v['sm_clock_mhz_median']:.0f} MHz"
                        for k, v in capped.items())
        cfg["sources"]["power_capped_clock"] = (
            f"{where}: least-squares line through the workloads that ran at the power cap "
            f"(median {top:.0f} W): {pts} (iosim.measure.clocks; iosim calibrate --clocks)")


def _dram_stream_figure(cfg: dict, streams: list, where: str) -> None:
    """The read-only stream rate from iosim.measure.dram_stream runs (their mean)."""
    rates = [s["dram_read_bandwidth_bytes_per_s"] for s in streams]
    cfg["dram_read_bandwidth_bytes_per_s"] = float(f"{sum(rates) / len(rates):.4g}")
    copies = ", ".join(f"{s['cupy_copyto_bandwidth_bytes_per_s'] / 1e12:.2f}" for s in streams)
    cfg["sources"]["dram_read_bandwidth_bytes_per_s"] = (
        f"{where}: mean of {len(rates)} run(s) of {streams[0]['method']}, read-only rows "
        f"{', '.join(f'{r / 1e12:.2f}' for r in rates)} TB/s (cupy copy in the same runs "
        f"{copies} TB/s); machine.dram_write_cost derives a written byte's cost from it and "
        f"the copy rate (iosim calibrate --dram-stream)")
    _dram_mix_figures(cfg, streams, where)


# read share of a dram_stream row → the GpuSpec field of its rate (machine.DRAM_MIX_FIELDS)
DRAM_MIX_ROW_FIELDS = {0.75: "dram_mixed_3r1w_bandwidth_bytes_per_s",
                       0.5: "dram_mixed_1r1w_bandwidth_bytes_per_s",
                       0.25: "dram_mixed_1r3w_bandwidth_bytes_per_s",
                       0.0: "dram_write_bandwidth_bytes_per_s"}


def _dram_mix_figures(cfg: dict, streams: list, where: str) -> None:
    """The rates of the mixed and the write-only rows of iosim.measure.dram_stream runs (the
    mean of each over the runs): machine.dram_byte_cost interpolates a byte's DRAM time
    between them by the read share of the bytes in flight."""
    for share, key in DRAM_MIX_ROW_FIELDS.items():
        rates = [r["bytes_per_s"] for s in streams for r in s["rows"]
                 if abs(r["read_bytes"] / (r["read_bytes"] + r["write_bytes"]) - share) < 1e-9]
        if len(rates) != len(streams):
            continue
        cfg[key] = float(f"{sum(rates) / len(rates):.4g}")
        cfg["sources"][key] = (
            f"{where}: mean of {len(rates)} run(s) of {streams[0]['method']}, the rows with "
            f"read share {share:g}: {', '.join(f'{r / 1e12:.2f}' for r in rates)} TB/s; "
            f"machine.dram_byte_cost interpolates a byte's DRAM time between the measured "
            f"mixes by the read share in flight (iosim calibrate --dram-stream)")


def calibrated_config(base: dict, results: dict, base_name: str, clocks: dict | None = None,
                      dram_streams: list | None = None) -> dict:
    cfg = json.loads(json.dumps(base))  # deep copy
    when = results.get("measured_on", "")
    dev = results.get("device", {})
    where = f"measured on {dev.get('name', 'the GPU')}{' ' + when if when else ''}"
    for key, section, field in FIGURES:
        if section in results:
            cfg[key] = float(f"{results[section][field]:.4g}")
            cfg["sources"][key] = f"{where}: {results[section]['method']} (iosim calibrate)"
    if "tensor_fp16" in results:
        # the datasheet peak stays as it is; the measurement is the achievable rate
        measured = float(f"{results['tensor_fp16']['tensor_flops_per_s']:.4g}")
        peak = cfg["tensor_flops_per_s"]
        scale = measured / peak["fp16"]
        cfg["tensor_flops_per_s_achievable"] = {
            dt: (float(f"{v * scale:.4g}") if v is not None else None) for dt, v in peak.items()}
        cfg["sources"]["tensor_flops_per_s_achievable"] = (
            f"{where}: fp16 {results['tensor_fp16']['method']}; other dtypes scaled from the "
            f"datasheet ratios by the same factor {scale:.3f} (iosim calibrate)")
    if "tensor_fp16_mma_sync" in results and "tensor_fp16" in results:
        ms = results["tensor_fp16_mma_sync"]
        ratio = ms["tensor_flops_per_s"] / results["tensor_fp16"]["tensor_flops_per_s"]
        cfg["tensor_mma_sync_fraction"] = float(f"{min(1.0, ratio):.4g}")
        cfg["sources"]["tensor_mma_sync_fraction"] = (
            f"{where}: {ms['method']}: {ms['tensor_flops_per_s'] / 1e12:.1f} TFLOP/s, over the "
            f"fp16 tensor_flops_per_s_achievable measurement (iosim calibrate)")
    for key in ("l2_capacity_bytes", "sm_count"):
        if key in dev:
            cfg[key] = int(dev[key])
            cfg["sources"][key] = f"{where}: cudaGetDeviceProperties (iosim calibrate)"
    if "clock_hz_reported" in dev:
        cfg["clock_hz"] = float(dev["clock_hz_reported"])
        cfg["sources"]["clock_hz"] = (f"{where}: cudaGetDeviceProperties clockRate (the SM clock "
                                      f"nvidia-smi also read while benchmarks ran) (iosim calibrate)")
    if clocks:
        cwhere = f"measured on {dev.get('name', 'the GPU')}{' ' + clocks['measured_on'] if clocks.get('measured_on') else ''}"
        _clock_figures(cfg, clocks, cwhere)
    if dram_streams:
        swhere = f"measured on {dram_streams[0].get('device', 'the GPU')} {dram_streams[0].get('measured_on', '')}".rstrip()
        _dram_stream_figure(cfg, dram_streams, swhere)
    cfg["name"] = base["name"] + " (calibrated)"
    cfg["short_name"] = base_name + "-calibrated"
    return cfg


@click.command()
@click.option("--gpu", "base", default="h200", show_default=True, help="Base config to calibrate.")
@click.option("--from-json", "from_json", type=click.Path(exists=True, dir_okay=False),
              help="Microbenchmark results to turn into a config (no GPU needed).")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="YAML to write [iosim/data/gpus/<base>-calibrated.yaml]; with no --from-json, "
                   "the JSON results when it ends in .json.")
@click.option("--clocks", "clocks_json", type=click.Path(exists=True, dir_okay=False),
              help="SM clocks under load (python -m iosim.measure.clocks): per-clock tensor "
                   "rates and the power-capped clock line.")
@click.option("--dram-stream", "dram_stream_json", multiple=True,
              type=click.Path(exists=True, dir_okay=False),
              help="DRAM stream rates by read share (python -m iosim.measure.dram_stream); "
                   "repeat for several runs: their mean read-only rate.")
@click.option("--force", is_flag=True, help="Overwrite the output if it exists.")
def calibrate(base, from_json, clocks_json, dram_stream_json, output, force):
    """Measure DRAM and L2 bandwidth, tensor-core and exp rates, launch overhead."""
    from ..hardware import SHORT_NAMES, _resolve
    from ..paths import GPU_CONFIG_DIR
    if from_json:
        results = json.loads(Path(from_json).read_text())
    else:
        try:
            from .microbench import run_all
            results = run_all()
        except ImportError:
            raise IosimError("calibrate needs cupy and an NVIDIA GPU; or pass --from-json") from None
        if output and output.endswith(".json"):
            _write(Path(output), json.dumps(results, indent=2, sort_keys=True), force)
            return
    from ..hardware import load_gpu
    base_path = _resolve(base)
    base_cfg = load_gpu(str(base_path)).model_dump()   # numbers as numbers
    stem = SHORT_NAMES.get(base, base_path.stem)
    clocks = json.loads(Path(clocks_json).read_text()) if clocks_json else None
    streams = [json.loads(Path(p).read_text()) for p in dram_stream_json]
    cfg = calibrated_config(base_cfg, results, base_cfg["short_name"], clocks, streams)
    from ..hardware import GpuSpec
    GpuSpec.model_validate(cfg)  # refuse to write an invalid config
    out = Path(output) if output else GPU_CONFIG_DIR / f"{stem}-calibrated.yaml"
    extra = (f" --clocks {clocks_json}" if clocks_json else "") + "".join(
        f" --dram-stream {p}" for p in dram_stream_json)
    header = (f"# Calibrated from {base_path.name} by `iosim calibrate --from-json {from_json}{extra}`;"
              f" do not edit measured figures by hand.\n") if from_json else ""
    _write(out, header + yaml.safe_dump(_yaml_plain(cfg), sort_keys=False, allow_unicode=True),
           force)


def _yaml_plain(v):
    """v with tuples as lists (a spec's point lists), which YAML's safe dumper writes."""
    if isinstance(v, dict):
        return {k: _yaml_plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_yaml_plain(x) for x in v]
    return v


def _write(path: Path, text: str, force: bool):
    if path.exists() and not force:
        raise IosimError(f"{path} exists; pass --force to overwrite it")
    path.write_text(text)
    click.echo(f"wrote {path}", err=True)
