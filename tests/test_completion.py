"""Shell completion (documented in README) comes from click and completes lazy commands too."""
import os
import subprocess
import sys


def complete(words: str, cword: int) -> list[str]:
    env = dict(os.environ, COMP_WORDS=words, COMP_CWORD=str(cword), _IOSIM_COMPLETE="bash_complete")
    code = "from iosim.cli import main; main(prog_name='iosim')"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    return out.stdout.split()


def test_completion_lists_lazy_subcommands():
    assert "plain,sweep" in complete("iosim sw", 1)


def test_completion_lists_options_of_run():
    assert "plain,--timeline" in complete("iosim run --time", 2)
