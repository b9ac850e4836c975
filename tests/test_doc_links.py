"""Every link between the documents resolves: README.md's and docs/'s links to other files of the
repository point at files that exist, and each ``#anchor`` names a heading of the target page.

mkdocs reports a missing anchor only at INFO level (not an error under --strict) unless
mkdocs.yml's ``validation`` says otherwise, and it does not read README.md: this test covers
both.  Anchors are computed as mkdocs computes them (Python-Markdown's toc slugify, a number
appended to a repeated heading)."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(text: str) -> list[str]:
    """``text``'s lines outside fenced code blocks (a ``# comment`` in a shell block is no heading)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            lines.append("")
        else:
            lines.append("" if fenced else line)
    return lines


def anchors(text: str) -> set[str]:
    """The ids of the headings of a page whose markdown is ``text``, as mkdocs gives them."""
    found: set[str] = set()
    for line in prose_lines(text):
        if match := HEADING.match(line):
            title = re.sub(r"[*_`]", "", match[2])  # emphasis and code marks are not in the id
            base = slugify(title, "-")
            anchor, n = base, 0
            while anchor in found:
                n += 1
                anchor = f"{base}_{n}"
            found.add(anchor)
    return found


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """Every link of ``path`` to a missing file or to a missing heading, as "file:line: why"."""
    problems = []
    for number, line in enumerate(prose_lines(path.read_text(encoding="utf-8")), 1):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:: not ours to check
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / unquote(file_part)).resolve() if file_part else path
            where = f"{path.relative_to(root)}:{number}: {target}"
            if not linked.exists():
                problems.append(f"{where}: no such file")
            elif (
                anchor
                and linked.suffix == ".md"
                and anchor not in anchors(linked.read_text(encoding="utf-8"))
            ):
                problems.append(f"{where}: {linked.name} has no heading with the anchor #{anchor}")
    return problems


def test_the_anchor_rule_matches_mkdocs() -> None:
    # A heading with emphasis, a section sign and an en dash, and a repeated heading.
    page = "# Top\n\n## *2026-11-24* Patterns (Zounmevo 2014, §5.8, Figs 5.13–5.22)\n\n## Top\n"
    page += "```sh\n# a shell comment\n```\n"
    assert anchors(page) == {"top", "2026-11-24-patterns-zounmevo-2014-58-figs-513522", "top_1"}


def test_the_checker_finds_a_broken_anchor_and_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\n## Kept\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#kept) [gone](a.md#renamed) [none](missing.md) [self](#b) [web](https://x.org/#y)\n"
        "```\n[in code](a.md#renamed)\n```\n# B\n",
        encoding="utf-8",
    )
    problems = broken_links(page, tmp_path)
    assert len(problems) == 2, problems
    assert "a.md#renamed" in problems[0] and "missing.md" in problems[1]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_and_anchor_resolves(path: Path) -> None:
    assert broken_links(path) == []


def api_objects() -> list[tuple[str, object]]:
    """Every object the API reference renders (``::: name`` in docs/api/), with its public
    members, as (dotted name, object)."""
    found: list[tuple[str, object]] = []
    for page in sorted((ROOT / "docs" / "api").glob("*.md")):
        for line in page.read_text(encoding="utf-8").splitlines():
            if not line.startswith(":::"):
                continue
            name = line[3:].strip()
            module_name, obj = name, None
            while obj is None:
                try:
                    obj = importlib.import_module(module_name)
                except ImportError:
                    module_name = module_name.rpartition(".")[0]
            for attribute in name[len(module_name) :].split(".")[1:]:
                obj = getattr(obj, attribute)
            found.append((name, obj))
            if inspect.isclass(obj) or inspect.ismodule(obj):
                found += [(f"{name}.{k}", v) for k, v in vars(obj).items() if not k.startswith("_")]
    return found


# A private module, the internal layers (no page of their own) or "the module docstring".
INTERNAL = re.compile(r"\baiorma(\.\w+)*\._\w+|\baiorma\.(transport|engine)\b|module docstring")


def test_api_docstrings_send_readers_only_to_pages_that_exist() -> None:
    objects = api_objects()
    assert len(objects) > 50, "the scan found too little"
    found = [
        f"{name}: {match[0]}"
        for name, obj in objects
        if not isinstance(obj, (int, str, float)) and (doc := inspect.getdoc(obj))
        for match in INTERNAL.finditer(doc)
    ]
    assert found == []
