"""Reading the text files iosim is given: one line saying why a file cannot be read, and YAML
through a safe loader (tags such as !!python/object are refused, never run). Apart from
formats.py (the typed models of those files) so that reading a GPU config (hardware.load_gpu)
does not build the models of scenario, sweep and measurement files.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from .errors import IosimError


def read_text(path: Path, what: str) -> str:
    """The file's text, or one line saying why it cannot be read (missing, a directory, binary)."""
    path = Path(path)
    if path.is_dir():
        raise IosimError(f"{what} {path} is a directory, not a file")
    if not path.is_file():
        raise IosimError(f"{what} not found: {path}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise IosimError(f"{what} {path} is not UTF-8 text (a binary file?)") from None
    except OSError as exc:
        raise IosimError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


# libyaml's parser with the safe constructor (PyYAML's CSafeLoader), ~14x faster than the
# pure-Python one (0.6 ms vs 8 ms for a GPU config), for the package's own data files, which
# both parse alike (tests/test_formats.py checks every one). Other files (a user's, possibly
# malformed) keep the pure-Python loader: libyaml accepts some documents it refuses (a tab
# inside a plain key), and its error messages are the ones reported.
_FAST_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _is_package_data(path: Path) -> bool:
    from .paths import DATA_DIR
    try:
        return Path(path).resolve().is_relative_to(DATA_DIR.resolve())
    except (OSError, ValueError):
        return False


def read_yaml(path: Path, what: str):
    """Parsed YAML (safe loader: tags such as !!python/object are refused, never run)."""
    text = read_text(path, what)
    if _is_package_data(path):
        try:
            return yaml.load(text, Loader=_FAST_SAFE_LOADER)
        except yaml.YAMLError:
            pass                 # reported as the pure-Python loader words it
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise IosimError(f"malformed YAML in {what} {path}{where}: {problem}") from None
