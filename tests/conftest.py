import importlib.util

import pytest
from hypothesis import Phase, settings

# scripts/mutate.py runs the tests once per mutant: no shrinking of a failing example (a
# mutant is killed by the first failure; shrinking it costs seconds), a fixed example sequence
settings.register_profile("mutation", phases=[Phase.explicit, Phase.reuse, Phase.generate],
                          derandomize=True, database=None)


def _gpu_available() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with cupy")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def validation_dataset():
    """(rows, summary) of `iosim validate` on the committed H200 dataset,
    computed once per test session (it simulates every configuration: ~1 min)."""
    from iosim.analysis.validate import validate_dataset
    return validate_dataset()
