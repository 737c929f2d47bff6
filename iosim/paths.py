"""Where the repository's data lives (GPU configs, scenarios)."""
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent
GPU_CONFIG_DIR = REPO_DIR / "configs" / "gpus"
SCENARIO_DIR = REPO_DIR / "scenarios"
