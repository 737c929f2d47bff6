"""Every CUDA source compiles with nvcc for sm_80 and sm_90, with and without trace mode (CPU:
needs nvcc, not a GPU). The kernels' default tilings are those of the schedule generators."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from iosim.kernels.build import CUDA_DIR, SOURCES

NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("trace", [False, True], ids=["timed", "trace"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("source", SOURCES)
def test_cuda_source_compiles(source, arch, trace, tmp_path):
    cmd = [NVCC, f"-arch={arch}", "-std=c++17", "-c", str(CUDA_DIR / source),
           "-o", str(tmp_path / "k.o")] + (["-DIOSIM_TRACE"] if trace else [])
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]


def test_kernels_package_imports_without_cupy():
    import importlib
    import sys

    mod = importlib.import_module("iosim.kernels")
    assert hasattr(mod, "compare_trace")
    assert "cupy" not in sys.modules or sys.modules["cupy"] is not None
