"""Where iosim's data lives: package data (GPU configs, scenarios, the validation dataset)
read through importlib.resources, so a regular install works from any directory."""
from importlib.resources import files
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
DATA_DIR = Path(str(files("iosim") / "data"))
GPU_CONFIG_DIR = DATA_DIR / "gpus"
SCENARIO_DIR = DATA_DIR / "scenarios"
VALIDATION_DIR = DATA_DIR / "validation"
# Captured kernel traces are test fixtures of a source checkout (tests/data/traces); an
# installed package has none, and whatever reads them says so.
REPO_DIR = PACKAGE_DIR.parent
TRACE_DIR = REPO_DIR / "tests" / "data" / "traces"
