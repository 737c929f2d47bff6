"""The `iosim run` table and JSON agree with themselves: peak vs simulated times labelled, the
bound follows from the busy times shown, sizes in the vendor's (binary) units, the compulsory
DRAM estimate not confusable with the simulated DRAM traffic."""
import json
import re

import pytest
from click.testing import CliRunner

import iosim.api as io
from iosim.cli import main
from iosim.report.text import analysis_table
from iosim.units import capacity

UNIT = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


@pytest.fixture(scope="module")
def headline():
    return io.run("fa2", "h100", seq=4096)


def row(table: str, label: str) -> str:
    return next(line[len(label):].strip() for line in table.splitlines()
                if line.startswith(label + " "))


def time_of(text: str) -> float:
    m = re.search(r"([\d.]+) (ns|µs|ms|s)\b", text)
    return float(m.group(1)) * UNIT[m.group(2)]


def test_capacities_are_binary_units_named_as_such():
    assert capacity(52428800) == "50 MiB"
    assert capacity(85899345920) == "80 GiB"
    assert capacity(233472) == "228 KiB"


def test_gpu_row_states_sizes_as_the_vendor_does(headline):
    gpu = row(analysis_table(headline), "GPU")
    assert "50 MiB L2" in gpu and "80 GiB DRAM" in gpu and "228 KiB shared memory" in gpu


def test_peak_times_sit_under_a_datasheet_peak_heading(headline):
    table = analysis_table(headline)
    peak = table.index("Time at datasheet peaks")
    sim = table.index("Simulated")
    assert peak < table.index("roofline time") < sim < table.index("predicted time")


def test_simulated_tensor_busy_is_its_mmas_plus_operand_reads_and_issue_slots_are_shown(headline):
    table = analysis_table(headline)
    busy = time_of(row(table, "tensor unit busy").split("=")[1])
    mmas = time_of(row(table, "  MMAs"))
    operand_row = row(table, "  shared-memory operand reads")
    operands = time_of(operand_row)
    issue = time_of(row(table, "MMA stream held by softmax"))
    # H100: ldmatrix overlaps mma.sync (GpuSpec.mma_sync_operands_overlap, measured on the
    # H200): the tensor unit's work is the MMAs plus what the reads take beyond them, plus the
    # MMA stream its warps hold for the softmax and their copy issue
    assert "overlapped by mma.sync" in operand_row
    beyond = time_of(operand_row.split(";")[-1])
    copy = time_of(row(table, "MMA stream held by copy issue"))
    assert busy == pytest.approx(mmas + beyond + issue + copy, rel=0.01)
    g, c = headline.gpu, headline.counters
    # every clocked rate at the clock the schedule sustains under load (iosim.clock)
    scale = headline.time_breakdown["clock_hz"] / g.clock_hz
    # MMAs at the mma.sync rate: achievable wgmma rate × measured mma.sync fraction
    assert mmas == pytest.approx(
        c.mma_flops / (g.tensor_rate("fp16") * scale * g.tensor_mma_sync_fraction), rel=0.01)
    # operand reads: the counted bytes at the GPU's shared-memory bandwidth
    assert operands == pytest.approx(
        c.smem_read_bytes_estimate / (g.shared_memory_bandwidth_bytes_per_s * scale), rel=0.01)
    # the softmax holds the MMA stream for the measured exposed fraction of its exp and ALU
    # time (2 CTAs of 4 warps per SM: 2 warps per sub-partition)
    f = g.mma_sync_exposed_fraction_two_warps
    assert issue == pytest.approx(
        f * (c.exp_count / (g.exp_per_clock_per_sm * g.clock_hz * scale)
             + c.alu_ops / (g.alu_ops_per_s * scale / g.sm_count)) / g.sm_count, rel=0.01)


def test_bound_by_names_the_unit_with_the_largest_busy_time_shown(headline):
    table = analysis_table(headline)
    busy = {label: time_of(row(table, label).split("=")[1])
            for label in ("tensor unit busy", "exp units busy", "ALUs busy", "L2 busy",
                          "DRAM busy")}
    assert max(busy, key=busy.get) == "tensor unit busy"
    assert row(table, "bound by").startswith("tensor cores")
    assert time_of(row(table, "predicted time")) >= max(busy.values())


def test_wgmma_operand_reads_overlap_instead_of_adding():
    a = io.run("fa3", "h100", seq=2048, heads=8)
    b = a.time_breakdown
    scale = b["clock_hz"] / a.gpu.clock_hz
    raw_operand_s = a.counters.smem_read_bytes_estimate / (
        a.gpu.shared_memory_bandwidth_bytes_per_s * scale)
    # per MMA op max(tensor, operands): at least the larger, less than their sum
    work = b["mma_s"] + b["mma_operand_reads_s"]
    assert max(b["mma_s"], raw_operand_s) * (1 - 1e-12) <= work < b["mma_s"] + raw_operand_s
    assert "overlapped by wgmma" in analysis_table(a)


def test_roofline_model_table_says_its_time_is_peak_plus_launches():
    a = io.run("fa2", "a100", model="roofline", seq=1024, heads=4)
    table = analysis_table(a)
    assert "Simulated" not in table
    assert "roofline time + 1 launch" in row(table, "predicted time")


def test_json_keeps_compulsory_and_simulated_dram_apart():
    r = CliRunner().invoke(main, ["run", "--seq", "4096", "--heads", "8", "--format", "json"])
    d = json.loads(r.output)
    c = d["counters"]
    q = k = v = o = 8 * 4096 * 128 * 2
    assert c["compulsory_dram_read_bytes"] == q + k + v
    assert c["compulsory_dram_write_bytes"] == o + 8 * 4096 * 4       # O and the fp32 LSE
    assert c["dram_read_bytes"] == c["compulsory_dram_read_bytes"]   # deprecated alias
    assert d["dram_source"].startswith("simulated")
    assert d["dram_read_bytes"] >= c["compulsory_dram_read_bytes"]


def test_csv_flattens_nested_records_into_dotted_columns():
    r = CliRunner().invoke(main, ["run", "--seq", "1024", "--heads", "2", "--model", "roofline",
                                  "--format", "csv"])
    header, values = r.output.splitlines()
    cols = header.split(",")
    assert "tiling.fwd.block_q" in cols and "counters.compulsory_dram_read_bytes" in cols
    assert "kernels" in cols and "roofline.tensor_time_s" in cols
