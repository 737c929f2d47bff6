"""Named problems in iosim/data/scenarios/*.yaml: a problem, a GPU, an algorithm and tiling fields
(the file format is formats.ScenarioFile)."""
from __future__ import annotations

from pathlib import Path

from .errors import IosimError
from .formats import ScenarioFile, load_scenario_file
from .paths import SCENARIO_DIR
from .problem import PROBLEM_KEYS

OTHER_KEYS = set(ScenarioFile.model_fields) - set(PROBLEM_KEYS)


def available_scenarios() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def load_scenario(name_or_path: str) -> dict:
    """The fields a scenario sets (validated), by bundled name or by path."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return load_scenario_file(p)
    bundled = SCENARIO_DIR / f"{name_or_path}.yaml"
    if not bundled.is_file():
        raise IosimError(f"unknown scenario {name_or_path!r}; available: "
                         + ", ".join(available_scenarios()))
    return load_scenario_file(bundled)
