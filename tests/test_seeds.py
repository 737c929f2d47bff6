"""The GPU tests' input seeds are the same in every process (Python's str hash is not)."""
import os
import subprocess
import sys
from pathlib import Path

from seeds import stable_seed

CASE = ((1, 4, 2, 130, 300, 128, True, "fp16"), "fa2")


def test_stable_seed_does_not_depend_on_the_hash_seed():
    code = f"from seeds import stable_seed; print(stable_seed(*{CASE!r}))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**env, "PYTHONHASHSEED": h}, check=True).stdout.strip()
            for h in ("1", "2")}
    assert seen == {str(stable_seed(*CASE))}


def test_stable_seed_is_a_32_bit_seed_that_tells_cases_apart():
    seeds = {stable_seed(CASE[0], a) for a in ("fa1", "fa2", "standard")}
    assert len(seeds) == 3 and all(0 <= s < 2**32 for s in seeds)
