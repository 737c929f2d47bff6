"""`iosim run --timeline` and `iosim capture --timeline`: Chrome/Perfetto trace-event JSON."""
import json
from collections import defaultdict
from pathlib import Path

from click.testing import CliRunner

import iosim.api as io
from iosim.cli import main
from iosim.kernels.trace import Trace
from iosim.machine import occupancy

TRACES = Path(__file__).parent / "data" / "traces"


def cli(*args):
    return CliRunner().invoke(main, list(args))


def load(path):
    return json.loads(Path(path).read_text())["traceEvents"]


def ctas(events):
    return [e for e in events if e["ph"] == "X" and e["cat"] == "cta"]


def test_run_timeline_has_one_complete_event_per_cta(tmp_path):
    out = tmp_path / "tl.json"
    r = cli("run", "--seq", "1024", "--heads", "8", "--timeline", str(out))
    assert r.exit_code == 0, r.output
    # FA-2 forward, N = 1024, Br = 128: 8 Q blocks × 8 heads
    assert len(ctas(load(out))) == 8 * 8
    assert sorted(e["args"]["cta"] for e in ctas(load(out))) == list(range(64))


def test_ctas_on_one_sm_slot_never_overlap_and_slots_fit_occupancy(tmp_path):
    out = tmp_path / "tl.json"
    cli("run", "--seq", "4096", "--heads", "8", "--timeline", str(out))
    events = load(out)
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    by_track = defaultdict(list)
    for e in ctas(events):
        by_track[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_track.values():
        spans.sort()
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(spans, spans[1:]))
    a = io.run(seq=4096, heads=8)
    per_sm = occupancy(a.gpu, a.schedule.kernels[0].launch)
    slots = {int(n.split("slot ")[1]) for n in names.values()}
    assert max(slots) < per_sm
    assert all(n.startswith("SM ") for n in names.values())


def test_each_kernel_is_its_own_process(tmp_path):
    out = tmp_path / "tl.json"
    cli("run", "--seq", "512", "--heads", "2", "--direction", "bwd", "--timeline", str(out))
    events = load(out)
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    a = io.run(seq=512, heads=2, direction="bwd")
    assert sorted(procs) == list(range(1, len(a.schedule.kernels) + 1))
    assert [procs[i + 1] for i in range(len(procs))] == [
        f"{k.name} (simulated)" for k in a.schedule.kernels]


def test_timeline_needs_the_simulator(tmp_path):
    out = tmp_path / "tl.json"
    r = cli("run", "--model", "roofline", "--timeline", str(out))
    assert r.exit_code == 2 and "--timeline needs the simulator" in r.output
    assert not out.exists()


def test_captured_trace_converts_with_one_phase_between_recorded_operations(tmp_path):
    src = TRACES / "fa2_fwd_n256_d128.json"
    out = tmp_path / "cap.json"
    r = cli("capture", "--from-trace", str(src), "--timeline", str(out))
    assert r.exit_code == 0, r.output
    trace = Trace.load(src)
    events = load(out)
    cta_events = ctas(events)
    recorded = [c for c in trace.kernels[0].ctas if c]
    assert len(cta_events) == len(recorded)
    phases = [e for e in events if e["ph"] == "X" and e["cat"] == "phase"]
    assert len(phases) == sum(len(c) - 1 for c in recorded)
    # every phase lies inside its CTA's event on the same track
    span = {(e["pid"], e["tid"], e["args"]["cta"]): (e["ts"], e["ts"] + e["dur"]) for e in cta_events}
    for p in phases:
        inside = [s for (pid, tid, _), s in span.items() if (pid, tid) == (p["pid"], p["tid"])
                  and s[0] - 1e-6 <= p["ts"] and p["ts"] + p["dur"] <= s[1] + 1e-6]
        assert inside


def test_from_trace_without_timeline_is_refused(tmp_path):
    r = cli("capture", "--from-trace", str(TRACES / "fa2_fwd_n256_d128.json"))
    assert r.exit_code == 2 and "--timeline" in r.output
