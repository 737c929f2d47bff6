"""`iosim teach`: the IO-complexity lesson for attention, every number computed by iosim.

Sections (one module each): hierarchy, standard, online_softmax, tiling, lower_bound,
backward, exercises. `lesson.build_lesson` returns them with their numbers (facts) and text;
`html.write_html` writes the offline page with plotly figures; `cli.teach` is the command.
"""
from .lesson import SECTIONS, build_lesson, lesson_text, resolve_section, section_names

__all__ = ["SECTIONS", "build_lesson", "lesson_text", "resolve_section", "section_names"]
