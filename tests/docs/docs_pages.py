"""Helpers for the documentation tests: the pages, the generator hook, the marked examples.

A marked example is a fenced block preceded by an HTML comment (invisible on the site and
on GitHub):
  <!-- docs-test -->             run every `$ perfkit ...` line of the console block
  <!-- docs-test: exact -->      ... and every output line shown must be printed
  <!-- docs-test: file NAME -->  write the block to NAME first (in the page's folder)
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
MARKER = re.compile(r"^<!-- docs-test(?::\s*(exact|file\s+\S+))?\s*-->$")
BOX = re.compile(r"^[\s─━┏┓┗┛┃┡┩│└┘┌┐├┤┬┴┼╇═]*$")  # table rules: widths follow the terminal


def hook() -> ModuleType:
    """docs/hooks/generate.py, the MkDocs hook that generates the CLI and schema pages."""
    spec = importlib.util.spec_from_file_location("docs_hook", DOCS / "hooks" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pages() -> list[Path]:
    """README.md and every Markdown page of the site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


@dataclass(frozen=True)
class Step:
    """One command of a marked example, or one file it writes first."""

    kind: str  # "run" or "file"
    text: str  # the command line (without "$ "), or the file's content
    name: str = ""  # the file to write (kind "file")
    output: tuple[str, ...] = ()  # the output lines the page shows after the command
    exact: bool = False  # every shown output line must be printed


def _fence(lines: list[str], start: int) -> tuple[list[str], int]:
    """The lines inside the fence opening at `start`, and the index after its close."""
    body, i = [], start + 1
    while not lines[i].startswith("```"):
        body.append(lines[i])
        i += 1
    return body, i + 1


def examples(path: Path) -> list[Step]:
    """The marked examples of one page, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    steps: list[Step] = []
    i = 0
    while i < len(lines):
        match = MARKER.match(lines[i].strip())
        if not match:
            i += 1
            continue
        j = i + 1
        while not lines[j].startswith("```"):
            j += 1
        body, i = _fence(lines, j)
        what = match.group(1) or ""
        if what.startswith("file"):
            steps.append(Step("file", "\n".join(body) + "\n", name=what.split()[1]))
        else:
            steps += commands(body, exact=what == "exact")
    return steps


def commands(body: list[str], exact: bool = False) -> list[Step]:
    """`$ ` lines (with `\\` continuations) and the output lines after each."""
    steps: list[Step] = []
    parts: list[str] = []
    output: list[str] = []
    open_ = False
    for line in body:
        if open_:
            parts.append(line.strip().rstrip("\\").strip())
            open_ = line.rstrip().endswith("\\")
        elif line.startswith("$ "):
            if parts:
                steps.append(Step("run", " ".join(parts), output=tuple(output), exact=exact))
            parts, output = [line[2:].rstrip().rstrip("\\").strip()], []
            open_ = line.rstrip().endswith("\\")
        else:
            output.append(line)
    if parts:
        steps.append(Step("run", " ".join(parts), output=tuple(output), exact=exact))
    return steps


def argv(step: Step) -> list[str]:
    """The arguments after `perfkit` of a marked command line."""
    words = shlex.split(step.text)
    assert words[0] == "perfkit", f"a marked example runs perfkit only: {step.text!r}"
    return words[1:]


def shown(step: Step) -> list[str]:
    """The output lines a page shows for a command, less elisions and table rules."""
    return [line.strip() for line in step.output
            if line.strip() and line.strip() != "..." and not BOX.match(line)]
