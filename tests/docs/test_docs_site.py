"""The documentation covers what the code has: a page per command, a catalogue entry per
finding id, a row per gate metric; the generated pages render; the README stays short.
The site's strict build (mkdocs build --strict) runs in .ci/run, not here: it takes longer
than a test should."""

from __future__ import annotations

import ast
import re

import pytest
from docs_pages import DOCS, README, ROOT, hook

from perfkit.docs_site import DOCS_URL
from perfkit.gate.rules import METRICS
from perfkit.summary import server_findings, tail_rules

COMMANDS = hook().command_names()


def test_the_app_has_the_commands_the_docs_expect():
    assert {"sweep", "fragmentation", "gate", "predict", "calibrate", "bench", "stacks",
            "report", "serve", "profiles", "env"} <= set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_a_page_in_the_nav_and_the_readme(name):
    page = DOCS / "commands" / f"{name}.md"
    assert page.is_file(), f"`perfkit {name}` has no docs page: write docs/commands/{name}.md"
    assert f"commands/{name}.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert f"(docs/commands/{name}.md)" in README.read_text(encoding="utf-8")
    assert page.read_text(encoding="utf-8").startswith(f"# perfkit {name}\n")


def test_help_of_every_command_and_subcommand_runs(cli):
    import typer

    from perfkit.cli.main import app

    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="perfkit")
    paths = [[name] for name in COMMANDS]
    for name in COMMANDS:
        group = root.get_command(ctx, name)
        paths += [[name, sub] for sub in getattr(group, "list_commands", lambda _: [])(ctx)]
    assert ["profiles", "show"] in paths
    for path in paths:
        result = cli(*path, "--help")
        assert result.exit_code == 0, (path, result.output)
        assert f"perfkit {' '.join(path)}" in result.output


def _emitted_ids() -> set[str]:
    """Every finding id a rule can emit: the literal first argument of each Finding(...)
    in perfkit/, and the tail rules' p99_<metric>_<cause> ids."""
    ids: set[str] = set()
    tail = {f"p99_{m}_{c}" for m in ("ttft", "tpot") for c in (*tail_rules.TIMED, "mixed")}
    server = {f"server_p99_{m}_{part}" for m, parts in server_findings.PARTS.items()
              for part in (*parts, "mixed")}
    for path in (ROOT / "perfkit").rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        if "Finding(" not in source:
            continue
        for node in ast.walk(ast.parse(source)):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Finding"):
                continue
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                ids.add(first.value)
            elif path.name == "server_findings.py":  # server_p99_<metric>_<part>
                ids |= server
            else:  # an id built at run time: only the tail rules build theirs
                assert path.name == "tail_rules.py", f"{path}: list this rule's ids here"
                ids |= tail
    return ids


def test_every_finding_id_has_its_catalogue_entry():
    text = (DOCS / "findings.md").read_text(encoding="utf-8")
    entries = set(re.findall(r"^### `?(\w+)`?\s*$", text, flags=re.M))
    emitted = _emitted_ids()
    assert len(emitted) > 30
    assert emitted - entries == set(), "finding ids without an entry in docs/findings.md"
    assert entries - emitted == set(), "catalogue entries no rule emits"


def test_every_gate_metric_has_its_row():
    text = (DOCS / "gate.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(\w+)` \| (?:timing|repeat|count) \|", text, flags=re.M))
    assert set(METRICS) == rows


def test_site_url_is_the_report_links_base():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^site_url: (\S+)$", config, flags=re.M).group(1) == DOCS_URL


def test_cli_reference_has_every_command_and_option():
    text = hook().cli_reference()
    for name in COMMANDS:
        assert f"## perfkit {name} {{ #perfkit-{name} }}" in text
    assert "### perfkit profiles show" in text
    assert "`--allow-inconclusive`" in text and "`--client-delay-steps <int>`" in text


def test_schema_page_has_every_object_and_field_comment():
    import json

    from perfkit.result.schema import SCHEMA_FILE

    text = hook().schema_reference()
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    for name in ["SweepResult", *schema["$defs"]]:
        assert f"### {name} {{ #{name.lower()} }}" in text
    assert "| `run_queue_s` | number \\| null | seconds the engine thread waited" in text


def test_readme_is_short_and_keeps_the_quickstart():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert ("```bash\npython -m venv .venv && . .venv/bin/activate && pip install -e . "
            "&& perfkit sweep\n```") in text
    test_command = re.search(r"^Run the tests:\n\n```bash\n(.+)\n```", text, flags=re.M)
    assert test_command and test_command.group(1).endswith("python -m pytest -n 2")
    for target in re.findall(r"\]\((?!https?:|#)([^)#\s]+)", text):
        assert (ROOT / target).exists(), f"README links to a missing file: {target}"


def test_the_ci_question_is_one_click_from_the_readme():
    """'How do I fail CI on a TPOT regression?': the README links the page that answers."""
    readme = README.read_text(encoding="utf-8")
    assert "(docs/gate.md)" in readme
    gate = (DOCS / "gate.md").read_text(encoding="utf-8")
    assert "## Fail CI on a TPOT regression" in gate
    assert "[rules.tpot_p50]" in gate and "perfkit gate out/base out/head" in gate
