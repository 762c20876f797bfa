"""MkDocs hook: the pages generated at build time from the code, so they cannot disagree.

- docs/reference/cli.md: the marker `<!-- generated: cli -->` becomes the reference of
  every command and subcommand of the Typer app, read from the same click objects that
  `perfkit X --help` prints (usage, help, each option with its default).
- docs/concepts/result-schema.md: the marker `<!-- generated: result-schema -->` becomes
  one table per object of perfkit/result/sweep.schema.json (the shipped JSON Schema), each
  field with its JSON type and the comment the result model gives it.

A hook rather than a plugin (mkdocs-click): Typer 0.29 builds its commands on its own
copy of click, which mkdocs-click does not recognise, and a hook needs no dependency
beyond mkdocs itself. The renderers are plain functions; tests call them directly.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

CLI_MARKER = "<!-- generated: cli -->"
SCHEMA_MARKER = "<!-- generated: result-schema -->"


# ---- the CLI reference -----------------------------------------------------------------


def _cell(text: str) -> str:
    """One Markdown table cell: Typer's rich escapes removed, pipes and newlines made safe."""
    text = text.replace("\\[", "[").replace("\n", " ")
    return re.sub(r"\s+", " ", text).replace("|", "\\|").strip()


def _command_md(command: Any, ctx: Any, path: str, level: int) -> list[str]:
    anchor = path.replace(" ", "-")
    out = [f"{'#' * level} {path} {{ #{anchor} }}", ""]
    if command.help:
        out += [inspect.cleandoc(command.help).replace("\\[", "["), ""]
    out += ["```", command.get_usage(ctx).strip(), "```", ""]
    rows = [r for r in (p.get_help_record(ctx) for p in command.get_params(ctx)) if r]
    if rows:
        out += ["| argument or option | meaning |", "| --- | --- |"]
        out += [f"| `{_cell(name)}` | {_cell(help_ or '')} |" for name, help_ in rows]
        out.append("")
    for name in getattr(command, "list_commands", lambda _: [])(ctx):
        sub = command.get_command(ctx, name)
        sub_ctx = type(ctx)(sub, info_name=name, parent=ctx)
        out += _command_md(sub, sub_ctx, f"{path} {name}", level + 1)
    return out


def _root() -> tuple[Any, Any]:
    """The `perfkit` group as click sees it, and its context."""
    import typer.main

    from perfkit.cli.main import app

    root: Any = typer.main.get_command(app)
    return root, typer.Context(root, info_name="perfkit")


def command_names() -> list[str]:
    """The top-level commands `perfkit --help` lists, in its order."""
    root, ctx = _root()
    return list(root.list_commands(ctx))


def cli_reference() -> str:
    """Markdown for every command, from the Typer app itself."""
    root, ctx = _root()
    out: list[str] = []
    for name in root.list_commands(ctx):
        command = root.get_command(ctx, name)
        out += _command_md(command, type(ctx)(command, info_name=name, parent=ctx),
                           f"perfkit {name}", 2)
    return "\n".join(out)


# ---- the result schema -----------------------------------------------------------------


def _type(node: dict[str, Any]) -> str:
    """A JSON Schema node as a short type: `integer | null`, `array of [Finding](#finding)`."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in node:
        return " \\| ".join(_type(n) for n in node["anyOf"])
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    kind = node.get("type")
    if kind == "array":
        return f"array of {_type(node.get('items', {}))}"
    if kind == "object" and "properties" not in node:
        values = node.get("additionalProperties", {})
        return "object" if not values else f"object of {_type(values)}"
    return str(kind or "any")


_FIELD = re.compile(r"^\s+(\w+)\s*:[^#]*?(?:#\s*(.*))?$")
_COMMENT = re.compile(r"^\s+#\s?(.*)$")


def field_comments(cls: type) -> dict[str, str]:
    """Each dataclass field's comment in the source, the result model's documentation of
    that field: its trailing comment, or the comment lines just above a field that has
    none; comment lines between two commented fields continue the one above."""
    comments: dict[str, str] = {}
    previous: str | None = None
    pending: list[str] = []

    def attach(name: str | None) -> None:
        if name is not None and pending:
            comments[name] = " ".join([comments.get(name, ""), *pending]).strip()
        pending.clear()

    for line in inspect.getsource(cls).splitlines()[1:]:
        field, more = _FIELD.match(line), _COMMENT.match(line)
        if more:
            pending.append(more.group(1).strip())
        elif field and not line.strip().startswith(("def ", "@", "return")):
            name, trailing = field.group(1), (field.group(2) or "").strip()
            attach(previous if trailing else name)
            comments[name] = " ".join([comments.get(name, ""), trailing]).strip()
            previous = name
        else:
            attach(previous)
            previous = None
    attach(previous)
    return comments


def _model_classes() -> dict[str, type]:
    import perfkit.result as result
    from perfkit.result import client_tail, level, point, remote, search, stacks, sweep, tail

    out: dict[str, type] = {}
    for module in (result, level, remote, search, stacks, sweep, tail, client_tail, point):
        for name, obj in vars(module).items():
            if isinstance(obj, type) and obj.__module__.startswith("perfkit.result"):
                out.setdefault(name, obj)
    return out


def _object_md(name: str, node: dict[str, Any], classes: dict[str, type]) -> list[str]:
    cls = classes.get(name)
    comments = field_comments(cls) if cls is not None else {}
    doc = inspect.getdoc(cls) if cls is not None and cls.__doc__ else ""
    out = [f"### {name} {{ #{name.lower()} }}", ""]
    if doc and not doc.startswith(f"{name}("):  # a dataclass's generated signature
        out += [doc.replace("\n", " "), ""]
    out += ["| field | type | meaning |", "| --- | --- | --- |"]
    for field, sub in node.get("properties", {}).items():
        out.append(f"| `{field}` | {_type(sub)} | {_cell(comments.get(field, ''))} |")
    return [*out, ""]


def schema_reference(path: Path | None = None) -> str:
    """Markdown tables of perfkit/result/sweep.schema.json, top object first."""
    from perfkit.result.schema import SCHEMA_FILE

    schema = json.loads((path or SCHEMA_FILE).read_text(encoding="utf-8"))
    classes = _model_classes()
    out = [f"Schema `{schema['$id']}` ({schema['$schema']}).", ""]
    out += _object_md("SweepResult", schema, classes)
    for name, node in schema.get("$defs", {}).items():
        out += _object_md(name, node, classes)
    return "\n".join(out)


# ---- the hook --------------------------------------------------------------------------


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if SCHEMA_MARKER in markdown:
        markdown = markdown.replace(SCHEMA_MARKER, schema_reference())
    return markdown
