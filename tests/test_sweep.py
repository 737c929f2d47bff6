"""`iosim sweep` and iosim.api.sweep: grid files, the Dask engine, resuming, GPU what-ifs."""
import pandas as pd
import pytest
from click.testing import CliRunner

import iosim.api as io
from iosim.cli import main
from iosim.errors import IosimError
from iosim.hardware import load_gpu
from iosim.sweep.engine import sweep
from iosim.sweep.point import scaled_gpu
from iosim.sweep.grid import load_grid, points

SMALL = {"gpu": ["h100", "a100"], "algo": ["fa2", "fa3"], "seq": [256, 512], "heads": 2,
         "model": "roofline"}


def cli(*args):
    return CliRunner().invoke(main, list(args))


def test_grid_lists_are_axes_and_scalars_fixed_last_key_fastest():
    grid, order = load_grid({"algo": ["fa1", "fa2"], "seq": [256, 512, 1024], "heads": 2})
    pts = points(grid, order)
    assert len(pts) == 6
    assert pts[:4] == [{"algo": "fa1", "seq": 256, "heads": 2}, {"algo": "fa1", "seq": 512, "heads": 2},
                       {"algo": "fa1", "seq": 1024, "heads": 2}, {"algo": "fa2", "seq": 256, "heads": 2}]


@pytest.mark.parametrize("text, message", [
    ("seq: [1024, many]\n", "grid.yaml:seq.1: Input should be a valid integer"),
    ("sequence: [1024]\n", "grid.yaml:sequence: unknown key"),
    ("seq: [0]\n", "grid.yaml:seq.0: must be > 0"),
    ("gpu: [h100, b999]\n", "grid.yaml:gpu.1: unknown GPU 'b999'"),
    ("seq: []\n", "grid.yaml:seq: List should have at least 1 item"),
])
def test_bad_grid_is_one_line_naming_file_and_field_exit_2_nothing_written(tmp_path, monkeypatch,
                                                                           text, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "grid.yaml").write_text(text)
    r = cli("sweep", "grid.yaml", "-o", "out.parquet", "--workers", "0")
    assert r.exit_code == 2
    assert r.output.startswith(f"error: {message}") and r.output.count("\n") == 1
    assert not (tmp_path / "out.parquet").exists()


def test_two_worker_local_cluster_gives_the_serial_rows_in_grid_order(tmp_path):
    dask_df = sweep(SMALL, tmp_path / "dask.parquet", workers=2)
    serial = sweep(SMALL, workers=0)
    assert list(dask_df["point.gpu"]) == ["h100"] * 4 + ["a100"] * 4
    assert list(dask_df["point.algo"]) == ["fa2", "fa2", "fa3", "fa3"] * 2
    assert list(dask_df["point.seq"]) == [256, 512] * 4
    cols = ["point_id", "predicted_time_s", "counters.l2_to_smem_bytes", "error"]
    pd.testing.assert_frame_equal(dask_df[cols], serial[cols])
    back = pd.read_parquet(tmp_path / "dask.parquet")
    pd.testing.assert_frame_equal(back[cols], serial[cols])


def test_each_row_is_the_run_json_flattened():
    df = sweep({"algo": "fa2", "seq": 512, "heads": 2, "model": "roofline"})
    a = io.run("fa2", seq=512, heads=2, model="roofline")
    row = df.iloc[0]
    assert row["predicted_time_s"] == a.predicted_time_s
    assert row["counters.l2_to_smem_bytes"] == a.counters.l2_to_smem_bytes
    assert row["tiling.fwd.block_q"] == a.tiling["fwd"].block_q
    assert pd.isna(row["error"])


def test_refused_point_is_a_row_with_its_reason():
    df = sweep({"gpu": "a100", "algo": ["fa2", "fa3"], "seq": 256, "heads": 2,
                "model": "roofline"})
    assert pd.isna(df["error"][0])
    assert "fa3 needs TMA and wgmma" in df["error"][1] and pd.isna(df["predicted_time_s"][1])


def test_rerun_skips_points_already_in_the_output(tmp_path):
    out = tmp_path / "out.csv"
    first = sweep({"algo": "fa2", "seq": [256, 512], "heads": 2, "model": "roofline"}, out)
    assert first.attrs["points_run"] == 2
    again = sweep({"algo": "fa2", "seq": [256, 512], "heads": 2, "model": "roofline"}, out)
    assert again.attrs["points_run"] == 0 and len(again) == 2
    grown = sweep({"algo": "fa2", "seq": [128, 256, 512], "heads": 2, "model": "roofline"}, out)
    assert grown.attrs["points_run"] == 1
    assert list(pd.read_csv(out)["point.seq"]) == [128, 256, 512]


def test_scale_factors_change_only_the_scaled_figures():
    h100 = load_gpu("h100")
    g = scaled_gpu("h100", {"l2_capacity_scale": 2.0, "shared_memory_scale": 0.5})
    assert g.l2_capacity_bytes == 2 * h100.l2_capacity_bytes
    assert g.shared_memory_per_sm_bytes == h100.shared_memory_per_sm_bytes // 2
    assert g.shared_memory_per_block_bytes == round(h100.shared_memory_per_block_bytes / 2)
    assert g.dram_bandwidth_bytes_per_s == h100.dram_bandwidth_bytes_per_s
    assert "L2 capacity ×2" in g.name


def test_halving_dram_bandwidth_doubles_the_dram_time():
    df = sweep({"seq": 1024, "heads": 2, "model": "roofline", "dram_bandwidth_scale": [1, 0.5]})
    t = list(df["roofline.dram_time_s"])
    assert t[1] == pytest.approx(2 * t[0], rel=1e-12)


def test_api_sweep_shorthand_and_grid_agree():
    a = io.sweep([256], ["fa2"], "a100", model="roofline", heads=2)
    b = io.sweep(grid={"gpu": "a100", "seq": [256], "algo": ["fa2"], "model": "roofline",
                       "heads": 2})
    assert a["predicted_time_s"].tolist() == b["predicted_time_s"].tolist()


def test_output_must_be_parquet_or_csv(tmp_path):
    with pytest.raises(IosimError, match="must end in .parquet or .csv"):
        sweep({"seq": 256}, tmp_path / "out.xlsx")


def test_an_existing_cluster_is_used_through_its_scheduler_address():
    import logging

    from dask.distributed import LocalCluster
    grid = {"algo": "fa2", "seq": [256, 512], "heads": 2, "model": "roofline"}
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster:
        df = sweep(grid, scheduler=cluster.scheduler_address)
    assert list(df["predicted_time_s"]) == list(sweep(grid)["predicted_time_s"])


def test_cli_reports_each_point_on_stderr_and_writes_parquet(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "grid.yaml").write_text("algo: [fa1, fa2]\nseq: 256\nheads: 2\nmodel: roofline\n")
    r = CliRunner().invoke(main, ["sweep", "grid.yaml", "-o", "out.parquet", "--workers", "0"])
    assert r.exit_code == 0, r.output
    steps = [line for line in r.stderr.splitlines() if line.startswith("sweep:")]
    assert len(steps) == 2 and steps[-1].endswith("algo=fa2") and " 2/2 " in steps[-1]
    assert r.stdout == ""
    assert list(pd.read_parquet(tmp_path / "out.parquet")["point.algo"]) == ["fa1", "fa2"]


def test_chunks_put_the_costliest_points_first_and_cover_each_once():
    from iosim.sweep.dispatch import chunks
    costs = [1, 9, 1, 1, 8, 1, 1, 1, 1, 1]
    c = chunks(list(range(10)), costs, slots=1)   # at most 1/4 of what is left per chunk
    # 9 and 8 exceed a quarter of the cost left (25/4, then 16/4): one point each; then the
    # points of cost 1 in grid order: 8 left, up to 2 per chunk (8/4 cost); then 6 left,
    # a quarter of their cost is 1.5: one per chunk from there on
    assert c == [[1], [4], [0, 2], [3], [5], [6], [7], [8], [9]]
    assert sorted(i for chunk in c for i in chunk) == list(range(10))


def test_equal_costs_are_chunked_in_grid_order_by_guided_self_scheduling():
    from iosim.sweep.dispatch import chunks
    c = chunks(list(range(20)), [0.0] * 20, slots=2)   # ceil(left / 8) points per chunk
    assert [len(x) for x in c] == [3, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1]
    assert [i for chunk in c for i in chunk] == list(range(20))


def test_cost_estimate_orders_points_by_simulated_work():
    from iosim.sweep.point import cost_estimate
    small, large = cost_estimate({"seq": 1024, "heads": 2}), cost_estimate({"seq": 4096, "heads": 2})
    assert large == 16 * small > 0        # attended pairs grow as seq^2 (non-causal)
    assert cost_estimate({"seq": 4096, "heads": 2, "model": "roofline"}) == 0
    assert cost_estimate({"seq": 0}) == 0   # refused before any work


def test_local_cluster_forks_its_workers_on_linux():
    import sys

    from iosim.sweep.dispatch import start_method
    assert start_method() == ("fork" if sys.platform.startswith("linux") else "spawn")


def test_scaled_gpu_survives_the_trip_to_a_worker_as_json():
    from iosim.hardware import GpuSpec
    g = scaled_gpu("h100", {"l2_capacity_scale": 0.25, "dram_bandwidth_scale": 3.0})
    assert GpuSpec.model_validate_json(g.model_dump_json()) == g


def test_sweep_leaves_the_callers_garbage_collector_as_it_found_it():
    import gc
    grid = {"algo": "fa2", "seq": [256, 512], "heads": 2, "model": "roofline"}
    assert gc.get_freeze_count() == 0
    sweep(grid)
    assert gc.get_freeze_count() == 0           # frozen for the sweep only
    gc.freeze()
    held = gc.get_freeze_count()
    try:
        sweep(grid)
        assert gc.get_freeze_count() == held    # the caller's own freeze is kept
    finally:
        gc.unfreeze()


def test_one_worker_runs_the_costliest_points_first(capsys):
    # seq 2048 has 16x the attended pairs of 512 (and 64x those of 256): its chunk has the
    # highest priority, so a single worker finishes it first; rows still come in grid order
    grid = {"algo": "fa2", "seq": [256, 512, 2048], "heads": 2, "model": "sim"}
    df = sweep(grid, workers=1, progress=True)
    steps = [line for line in capsys.readouterr().err.splitlines() if line.startswith("sweep:")]
    assert steps[0].endswith("seq=2048") and len(steps) == 3
    assert list(df["point.seq"]) == [256, 512, 2048]
