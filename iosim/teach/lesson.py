"""The lesson: eight sections, each a module with NAME, TITLE, facts(ctx) and text(facts)."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import IosimError
from . import (backward, decode, exercises, hierarchy, lower_bound, online_softmax, standard,
               tiling)
from .context import LessonContext

SECTIONS = (hierarchy, standard, online_softmax, tiling, lower_bound, backward, exercises,
            decode)


@dataclass
class Section:
    number: int
    name: str
    title: str
    facts: dict
    text: str


def section_names() -> list[str]:
    return [m.NAME for m in SECTIONS]


def resolve_section(key) -> int:
    """1-based section number from a number or a name (a unique prefix is enough)."""
    names = section_names()
    s = str(key).strip().lower()
    if s.isdigit():
        n = int(s)
        if 1 <= n <= len(SECTIONS):
            return n
    else:
        if s in names:
            return names.index(s) + 1
        hits = [i for i, n in enumerate(names) if n.startswith(s)]
        if len(hits) == 1:
            return hits[0] + 1
    choices = ", ".join(f"{i} {n}" for i, n in enumerate(names, 1))
    raise IosimError(f"unknown section {key!r}; choose a number or name: {choices}")


def build_section(ctx: LessonContext, number: int) -> Section:
    mod = SECTIONS[number - 1]
    f = mod.facts(ctx)
    return Section(number, mod.NAME, mod.TITLE, f, mod.text(f))


def build_lesson(problem, gpu="h100", sections=None, seed: int = 0,
                 progress: bool = False) -> list[Section]:
    """The sections (all, or the numbers given); progress: a bar on stderr if it takes > 2 s."""
    from ..progress import Progress
    ctx = LessonContext.make(problem, gpu, seed)
    numbers = list(sections or range(1, len(SECTIONS) + 1))
    bar = Progress(len(numbers), desc="teach", enabled=progress and len(numbers) > 1, delay=2.0)
    out = []
    for n in numbers:
        out.append(build_section(ctx, n))
        bar.step(SECTIONS[n - 1].NAME)
    bar.close()
    return out


def preamble(problem, gpu) -> str:
    from ..hardware import load_gpu
    g = load_gpu(gpu)
    title = "The IO complexity of attention, with live numbers from iosim"
    return "\n".join([title, "#" * len(title), "",
                      f"GPU: {g.name} ({g.short_name}). Problem: {problem.describe()}.",
                      "Every number below is computed by iosim for this configuration.", "", ""])


def lesson_text(problem, gpu="h100", sections=None, seed: int = 0,
                progress: bool = False) -> str:
    parts = [s.text for s in build_lesson(problem, gpu, sections, seed, progress)]
    head = preamble(problem, gpu) if not sections or len(sections) > 1 else ""
    return head + "\n\n\n".join(parts) + "\n"
