"""The docs' cheap examples run as written: every marked `$ perfkit ...` line exits as the
page shows (0, or 2 with the error line it shows), and an `exact` example prints every
output line the page shows."""

from __future__ import annotations

import pytest
from docs_pages import ROOT, argv, examples, pages, shown

MARKED = [p for p in pages() if examples(p)]


def test_the_marked_examples_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in MARKED}
    assert {"README.md", "docs/commands/fragmentation.md", "docs/guides/datasets.md"} <= names


@pytest.mark.parametrize("page", MARKED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_marked_examples_run_as_shown(page, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")
    for step in examples(page):
        if step.kind == "file":
            (tmp_path / step.name).write_text(step.text, encoding="utf-8")
            continue
        result = cli(*argv(step), width=80)
        printed = [line.strip() for line in result.output.splitlines()]
        errors = [line for line in shown(step) if line.startswith("error:")]
        assert result.exit_code == (2 if errors else 0), (step.text, result.output[-2000:])
        for line in errors:
            assert line in printed, (step.text, result.output)
        if step.exact:
            missing = [line for line in shown(step) if line not in printed]
            assert not missing, (step.text, missing, result.output[-3000:])
