"""A one-line progress bar on stderr for long sweeps (no dependency)."""
from __future__ import annotations

import sys


class Progress:
    """`[#####     ] 12/40 fa2 N=8192`, redrawn in place with a carriage return.

    On a terminal the line is redrawn at every step; elsewhere (a log, a pipe) only the final
    line is written, so logs stay short. `enabled=False` writes nothing.
    """

    def __init__(self, total: int, stream=None, width: int = 30, enabled: bool = True):
        self.total = max(1, total)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_len = 0

    def line(self, label: str = "") -> str:
        filled = int(round(self.width * self.done / self.total))
        bar = "#" * filled + " " * (self.width - filled)
        return f"[{bar}] {self.done}/{self.total} {label}".rstrip()

    def step(self, label: str = "") -> None:
        self.done = min(self.total, self.done + 1)
        if not self.enabled or not self.tty:
            return
        text = self.line(label)
        pad = " " * max(0, self._last_len - len(text))
        self.stream.write("\r" + text + pad)
        self.stream.flush()
        self._last_len = len(text)

    def close(self, label: str = "done") -> None:
        if not self.enabled:
            return
        text = self.line(label)
        if self.tty:
            pad = " " * max(0, self._last_len - len(text))
            self.stream.write("\r" + text + pad + "\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
