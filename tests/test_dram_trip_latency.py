"""A dependent DRAM trip's latency under load (machine.loaded_trip_latency_s) against the H100
probe of measurements/h100/dram_loaded_latency/, and how both engines take the utilization."""
import sys
from pathlib import Path

import pytest

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.machine import loaded_trip_latency_s
from iosim.sim import memory, simulate
from iosim.sim.memory import ExpectedMemory, Server

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def test_the_h100_config_holds_the_curves_the_probe_gives():
    from dram_trip_latency_curve import curve, load_rows, DEFAULT
    rows = load_rows(DEFAULT)
    cfg = load_gpu("h100").dram_trip_latency
    for write, name in ((0, "read_only"), (1, "read_write_1to1")):
        got = getattr(cfg, name)
        want = curve(rows, write)
        assert len(got) == len(want) >= 6
        for (u, s), (wu, ws) in zip(got, want):
            assert u == pytest.approx(wu, abs=1e-3) and s == pytest.approx(ws, rel=1e-3)


@pytest.mark.parametrize("name", ["h200", "h200-calibrated"])
def test_the_h200_configs_hold_the_h100_curves_scaled_to_the_h200s_lone_trips(name):
    from dram_trip_latency_curve import curve, h200_scale, load_rows, DEFAULT
    rows = load_rows(DEFAULT)
    scale = h200_scale(rows)
    assert 1.05 < scale < 1.25            # the H200's lone trips run 459-494 ns
    cfg = load_gpu(name).dram_trip_latency
    for write, field in ((0, "read_only"), (1, "read_write_1to1")):
        for (u, s), (wu, ws) in zip(getattr(cfg, field), curve(rows, write)):
            assert u == pytest.approx(wu, abs=1e-3) and s == pytest.approx(ws * scale, rel=1e-3)


def test_the_probe_repeats_and_loaded_trips_wait_longer():
    from dram_trip_latency_curve import curve, load_rows, DEFAULT, unloaded
    runs = [curve(load_rows([p]), 1) for p in DEFAULT]
    assert len(runs) == 2
    for a, b in zip(*runs):          # the two device calls agree point by point within 4%
        assert a[1] == pytest.approx(b[1], rel=0.04)
    u0 = unloaded(load_rows(DEFAULT))
    # a cold chase reaches DRAM, the repeats find it in L2; a trip of 2 KB takes longer
    assert 300 < u0["dram_line_ns"] < u0["dram_trip_ns"] < 500
    assert 100 < u0["l2_line_ns"] < u0["l2_trip_ns"] < 250


def test_latency_follows_utilization_and_the_mix():
    g = load_gpu("h100")
    assert loaded_trip_latency_s(g, 0.0, 1.0) == pytest.approx(g.dram_trip_latency.read_only[0][1])
    lat = [loaded_trip_latency_s(g, u, 1.0) for u in (0.0, 0.5, 0.9, 1.0, 1.5)]
    assert lat == sorted(lat) and lat[-1] == lat[-2]          # held flat past saturation
    assert lat[3] > 2.5 * lat[0]
    # writes in the mix lengthen it: 1:1 above read-only, 3:1 between
    mid = [loaded_trip_latency_s(g, 0.8, s) for s in (1.0, 0.75, 0.5, 0.2)]
    assert mid[0] < mid[1] < mid[2] == mid[3]
    # a config without the curve keeps its pointer-chase latency
    a100 = load_gpu("a100")
    assert loaded_trip_latency_s(a100, 0.9, 0.5) == a100.dram_latency_s


def test_exact_memory_takes_the_kernels_served_dram_work_over_its_time():
    g = load_gpu("h100")
    mem = memory.exact_memory(g, 1 << 20)
    mem.begin_kernel(0.0)
    assert mem.dram_utilization(1e-6) == (0.0, 1.0)
    # 1 µs of reads served between 0 and 2 µs: half busy
    mem.dram_server.reserve(0.0, mem.dram_server.rate * 1e-6)
    mem.kernel_counters.dram_read_bytes = 1000
    mem.kernel_counters.dram_write_bytes = 1000
    u, share = mem.dram_utilization(2e-6)
    assert u == pytest.approx(0.5) and share == 0.5
    # work still queued does not count as served
    mem.dram_server.reserve(2e-6, mem.dram_server.rate * 4e-6)
    assert mem.dram_utilization(3e-6)[0] == pytest.approx(2.0 / 3.0)
    # a miss's trip takes the curve at that point, a hit the L2's latency
    assert mem.trip_latency_s(("S", 0), "S", 3e-6) == pytest.approx(
        loaded_trip_latency_s(g, 2.0 / 3.0, 0.5))
    mem.begin_kernel(10e-6)            # the next kernel counts from its own start
    assert mem.dram_utilization(12e-6)[0] == pytest.approx(0.0)


def test_expected_memory_takes_the_trips_at_the_characterizers_utilization():
    g = load_gpu("h100")
    curve = memory.trip_latency_of(g)
    mem = ExpectedMemory(Server(g.l2_bandwidth_bytes_per_s), Server(g.dram_bandwidth_bytes_per_s),
                         g.l2_latency_s, g.dram_latency_s, {"S": (1.0, 1.0)},
                         trip_latency=curve, trip_utilization=0.7, read_share=0.5)
    assert mem.trip_latency_s(None, "S", 1e-6) == pytest.approx(curve(0.7, 0.5))
    half = ExpectedMemory(Server(1.0), Server(1.0), 1e-7, 5e-7, {"S": (0.5, 0.5)},
                          trip_latency=lambda u, s: 1e-6)
    assert half.trip_latency_s(None, "S", 1.0) == pytest.approx(0.5e-7 + 0.5e-6)


def test_the_fast_modes_fixed_point_finds_the_utilization_exact_mode_runs_at():
    # N 4096 at 2 CTAs per SM on the h100 (the H100 probe's point): exact mode's trips see
    # the DRAM 0.73 busy; the characterizer's fixed point must land there, not at the
    # saturation a burst of its private server's first CTAs would suggest
    from iosim.sim import characterize
    seen = {}
    curve = memory.trip_latency_of(load_gpu("h100"))

    def traced(u, s):
        seen.setdefault(mode, []).append(u)
        return curve(u, s)
    sys.path.insert(0, str(ROOT / "scripts"))
    import softmax_scalar_check as ssc
    row = next(r for r in ssc.h100_probe_rows() if r["n"] == 4096 and r["ctas_per_sm"] == 2)
    t = {}
    for mode in ("exact", "fast"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(memory, "trip_latency_of", lambda gpu: traced)
            mp.setattr(characterize, "trip_latency_of", lambda gpu: traced)
            t[mode] = ssc.simulate_row(row, "h100", mode=mode)
    exact_u = sorted(seen["exact"])[len(seen["exact"]) // 2]
    fast_u = seen["fast"][-1]
    assert 0.6 < exact_u < 0.85
    assert fast_u == pytest.approx(exact_u, abs=0.04)
    assert t["fast"] == pytest.approx(t["exact"], rel=0.02)


@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_the_softmax_slows_when_its_dram_is_loaded(mode):
    # the mechanism moves the standard softmax at a few CTAs per SM (N 8192: its rows of S
    # fill shared memory, 3 CTAs per SM), where the loaded DRAM's trips set its time
    g = load_gpu("h100")
    flat = g.model_copy(update={"dram_trip_latency": None,
                                "dram_latency_s": g.dram_trip_latency.read_only[0][1]})
    s = build_schedule(AttentionProblem(batch=1, heads_q=4, heads_kv=4, seq_q=8192, seq_kv=8192,
                                        head_dim=128), g, "standard")
    t = {name: simulate(s, gpu, mode=mode).kernels[1].time_s
         for name, gpu in (("loaded", g), ("flat", flat))}
    assert t["loaded"] > 1.05 * t["flat"]   # +8%: the trips at 3 CTAs per SM


@pytest.mark.parametrize("bad", [[[0.5, 1e-7], [0.2, 2e-7]], [[0.0, 1e-7], [1.5, 2e-7]],
                                 [[0.0, -1e-7]], "x"])
def test_a_malformed_curve_in_a_users_gpu_yaml_is_refused_in_one_line(tmp_path, bad):
    import subprocess
    import yaml
    from iosim.paths import GPU_CONFIG_DIR
    data = yaml.safe_load((GPU_CONFIG_DIR / "h100-sxm5-80gb.yaml").read_text())
    data["dram_trip_latency"]["read_only"] = bad
    p = tmp_path / "gpu.yaml"
    p.write_text(yaml.safe_dump(data))
    r = subprocess.run([sys.executable, "-m", "iosim", "run", "--gpu", str(p), "--seq", "1024"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "dram_trip_latency.read_only" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
