"""Named problems in iosim/data/scenarios/*.yaml: a problem, a GPU, an algorithm and tiling fields."""
from __future__ import annotations

from pathlib import Path

import yaml

from .errors import IosimError
from .paths import SCENARIO_DIR

PROBLEM_KEYS = {"batch", "heads_q", "heads_kv", "seq_q", "seq_kv", "head_dim", "dtype",
                "causal", "direction", "seq_kv_list", "prefix_len", "page_size", "page_layout"}
OTHER_KEYS = {"gpu", "algorithm", "algorithms", "description", "block_q", "block_kv", "stages",
              "warps", "seq_range", "splits"}


def available_scenarios() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def load_scenario(name_or_path: str) -> dict:
    p = Path(name_or_path)
    if not (p.suffix in (".yaml", ".yml") and p.is_file()):
        p = SCENARIO_DIR / f"{name_or_path}.yaml"
    if not p.is_file():
        raise IosimError(f"unknown scenario {name_or_path!r}; available: "
                         + ", ".join(available_scenarios()))
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError:
        raise IosimError(f"malformed YAML in scenario {p}") from None
    if not isinstance(data, dict):
        raise IosimError(f"scenario {p} must hold a mapping")
    unknown = set(data) - PROBLEM_KEYS - OTHER_KEYS
    if unknown:
        raise IosimError(f"scenario {p.name}: unknown field(s) {', '.join(sorted(unknown))}")
    return data
