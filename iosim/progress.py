"""Progress on stderr for commands that run longer than a moment, through tqdm.

On a terminal tqdm redraws one bar in place. Elsewhere (a log, a pipe, CI) a redrawn bar would
pile up carriage returns, so each step is written as its own line, formatted by the same
library (`tqdm.format_meter`): `sweep:  25%|###   | 3/12 [00:01<00:03, ...] fa2 N=4096`.
`enabled=False` writes nothing; `delay` (seconds) writes nothing until that much time has
passed, so a command that is usually quick (compare, teach) stays quiet unless it is not.
Every long-running command (sweep, report, compare, teach, validate) reports through this one
class.
"""
from __future__ import annotations

import sys
import time

from tqdm import tqdm


class Progress:
    def __init__(self, total: int, desc: str = "", stream=None, enabled: bool = True,
                 width: int = 60, delay: float = 0.0):
        self.total = max(1, int(total))
        self.done = 0
        self.desc = desc
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.width = width
        self.delay = delay
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._t0 = time.monotonic()
        self._bar = None
        if enabled and self.tty:
            self._bar = tqdm(total=self.total, desc=desc or None, file=self.stream,
                             dynamic_ncols=True, leave=True, delay=delay)

    def line(self, label: str = "") -> str:
        """The one-line form of the current state (what a non-terminal gets per step)."""
        text = tqdm.format_meter(self.done, self.total, time.monotonic() - self._t0,
                                 ncols=self.width, prefix=self.desc)
        return f"{text} {label}".rstrip()

    def step(self, label: str = "", n: int = 1) -> None:
        self.done = min(self.total, self.done + n)
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.set_postfix_str(label, refresh=False)
            self._bar.update(n)
        elif time.monotonic() - self._t0 >= self.delay:
            self.stream.write(self.line(label) + "\n")
            self.stream.flush()

    def close(self, label: str = "") -> None:
        if self._bar is not None:
            if label:
                self._bar.set_postfix_str(label, refresh=False)
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
