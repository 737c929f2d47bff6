"""The copy-issue mechanism (machine.copy_issue_s_per_byte, Pipeline.copy_issue_cycles_per_byte):
a CTA whose threads issue their own cp.async copies spends that time issuing, not computing.
Its constants for fd_split come from the committed H200 traces (clock64 stamps)."""
import glob
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from iosim import AttentionProblem, build_schedule, load_gpu
from iosim.algorithms import flash_decoding as fd
from iosim.kernels.decode import copy_issue_cycles
from iosim.machine import copy_issue_s_per_byte
from iosim.schedule import Pipeline, Schedule
from iosim.sim import simulate

H200 = load_gpu("h200")
TRACES = sorted(glob.glob(str(Path(__file__).parent / "data" / "traces" / "flash-decoding_*.json")))


def _samples(paged: bool) -> list:
    out = []
    for f in TRACES:
        t = json.loads(Path(f).read_text())
        if bool(t["problem"].get("page_size")) == paged:
            out += copy_issue_cycles(t)
    return out


@pytest.mark.parametrize("paged, constant", [(False, fd.COPY_ISSUE_CYCLES_CONTIGUOUS),
                                             (True, fd.COPY_ISSUE_CYCLES_PAGED)])
def test_fd_split_copy_constants_are_the_traces_medians(paged, constant):
    samples = _samples(paged)
    assert len(samples) >= 40
    assert constant == pytest.approx(float(np.median(samples)), rel=0.05)


def test_copy_issue_cycles_reads_a_synthetic_trace():
    # Q at cycle 0, K at 1000, V at 1100 (a trace write of 100 cycles): (1000 - 100) / copies,
    # copies = 2 x 128 keys x 16 chunks / 128 threads = 32 → 28.125 cycles per copy
    ev = [[1, 4, [0, 0, 0], 4096, 0, 0, 0], [1, 0, [0, 0, 0], 32768, 0, 0, 1000],
          [1, 6, [0, 0, 0], 32768, 0, 0, 1100]]
    t = {"problem": {"head_dim": 128}, "tiling": {"fwd": {"block_kv": 128}},
         "kernels": [{"name": "fd_split", "threads": 128, "names": ["K", "x", "y", "z", "Q", "w", "V"],
                      "ctas": [ev]}]}
    assert copy_issue_cycles(t) == [pytest.approx(900 / 32)]


def test_copy_issue_seconds_per_byte_is_cycles_over_the_clock():
    pipe = Pipeline(stages=2, copy_issue_cycles_per_byte=0.5)
    assert copy_issue_s_per_byte(H200, pipe) == pytest.approx(0.5 / H200.clock_hz)
    assert copy_issue_s_per_byte(H200, Pipeline(stages=2)) == 0.0


def test_fd_split_pipeline_carries_the_paged_or_contiguous_constant():
    for page, cycles in ((None, fd.COPY_ISSUE_CYCLES_CONTIGUOUS), (16, fd.COPY_ISSUE_CYCLES_PAGED)):
        p = AttentionProblem(batch=2, heads_q=8, heads_kv=2, seq_q=1, seq_kv=1024, page_size=page)
        k = next(k for k in build_schedule(p, H200, "flash-decoding").kernels if k.name == "fd_split")
        assert k.pipeline.copy_issue_cycles_per_byte == pytest.approx(cycles / (16 * k.launch.threads_per_cta))


def _lone_cta(copy_cycles_per_byte=None):
    p = AttentionProblem(batch=1, heads_q=1, heads_kv=1, seq_q=1, seq_kv=16384)
    s = build_schedule(p, H200, "flash-decoding", block_kv=128, stages=2, splits=1)
    if copy_cycles_per_byte is None:
        return s
    ks = tuple(replace(k, pipeline=replace(k.pipeline, copy_issue_cycles_per_byte=copy_cycles_per_byte))
               for k in s.kernels)
    return Schedule(s.algorithm, s.problem, s.tiling, ks, notes=s.notes)


@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_a_lone_cta_streams_one_tile_per_issue_plus_compute(mode):
    # issue and compute in series: the period of a tile is at least its copies' issue time plus
    # its compute (the unit busy times of one tile); 128 tiles of 64 KiB
    s = _lone_cta()
    with_issue = simulate(s, H200, mode).time_s
    k = s.kernels[0]
    issue_s = 2 * 128 * 128 * 2 * copy_issue_s_per_byte(H200, k.pipeline)
    bare = simulate(_lone_cta(0.0), H200, mode).time_s
    assert with_issue >= 128 * issue_s
    # the copy issue adds most of its time: it is not hidden under the memory wait
    assert with_issue - bare >= 0.5 * 128 * issue_s


def test_copy_issue_changes_nothing_where_the_pipeline_has_none():
    # FA-3: a TMA producer warp issues the copies (FA-1/FA-2 carry their traces' constants
    # since the measured mma.sync model: tests/test_copy_issue_traces.py)
    p = AttentionProblem(batch=1, heads_q=8, heads_kv=8, seq_kv=2048, seq_q=2048)
    s = build_schedule(p, H200, "fa3")
    assert all(k.pipeline.copy_issue_cycles_per_byte == 0.0 for k in s.kernels)
