"""The examples run as a user would run them, and what they print agrees with closed forms
(bytes) and with the physics they illustrate (which resource a schedule is bound by)."""
import subprocess
import sys
from math import ceil
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str, *args: str) -> list[str]:
    out = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                         text=True, check=True, timeout=300).stdout
    return out.strip().splitlines()


def rows(lines: list[str], first: str) -> dict:
    """{row name: [cells]} of the table whose header starts with `first`."""
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    return {line.split()[0]: line.split()[1:] for line in lines[start + 1:]}


def test_compare_schedules_prints_the_closed_form_bytes_of_fa2():
    import iosim.api as io
    N, d, heads, elem = 4096, 128, 32, 2
    table = rows(run_example("compare_schedules.py", "--seq", str(N)), "algo")
    block_q = io.run("fa2", seq=N, model="roofline").to_dict()["tiling"]["fwd"]["block_q"]
    # every Q block reads its Q tile once and all of K and V: Q + ⌈N/Br⌉·(K + V) per head
    l2_to_sm = heads * (N * d * elem + ceil(N / block_q) * 2 * N * d * elem)
    assert float(table["fa2"][0]) == pytest.approx(l2_to_sm / 1e9, abs=1e-3)
    # O once (fp16) and the log-sum-exp (fp32) per row
    assert float(table["fa2"][1]) == pytest.approx(heads * N * (d * elem + 4) / 1e9, abs=1e-3)
    compulsory = 4 * heads * N * d * elem                      # Q, K, V in; O out
    for algo in ("fa1", "fa2", "fa3"):
        assert float(table[algo][2]) >= compulsory / 1e9 - 1e-3
    assert float(table["fa1"][1]) > float(table["fa2"][1])    # FA-1's O, l, m round trips


def test_what_if_hardware_speeds_up_each_schedule_on_its_binding_resource():
    lines = run_example("what_if_hardware.py", "--seq", "1024")
    speed = {name: [float(x) for x in cells] for name, cells in
             ((line[:18].strip(), line[18:].split()) for line in lines[2:6])}
    bound = lines[6][18:].split()
    assert bound[0] == "dram" and bound[1] == "tensor"
    standard, fa2 = 0, 1
    assert speed["2x DRAM bandwidth"][standard] > 1.3          # S and P through DRAM
    assert speed["2x tensor cores"][standard] < 1.05
    # MMA-bound; the exposed softmax and copy issue of its MMA warps do not speed up with the
    # tensor cores (1.17 since the measured mma.sync model)
    assert speed["2x tensor cores"][fa2] > 1.1
    assert speed["2x DRAM bandwidth"][fa2] < 1.05
