"""Every link between the documents resolves: README.md's and docs/'s links to other files of the
repository point at files that exist, and each ``#anchor`` names a heading of the target page.

The Sphinx build (-W -n) fails on a broken link between docs/ pages, but it does not read
README.md, and a quick check without a build is cheaper: this test covers both.  Anchors are
computed as MyST computes them with ``myst_heading_anchors = 3`` (docs/conf.py): GitHub's slug of
headings of levels 1 to 3, ``-1``, ``-2``... appended to a repeated one.  The site's table of
contents (the toctrees of docs/index.md) lists every page once, and the API reference documents
every public name."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from myst_parser.slugs import github_slugify, unique_slug

import aiorma

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
ANCHOR_LEVELS = 3  # docs/conf.py's myst_heading_anchors
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
    """The anchors of the headings of a page whose markdown is ``text``, as MyST gives them."""
    found: set[str] = set()
    for line in prose_lines(text):
        if (match := HEADING.match(line)) and len(match[1]) <= ANCHOR_LEVELS:
            title = re.sub(r"[*_`]", "", match[2])  # emphasis and code marks are not in the id
            if slug := github_slugify(title):
                found.add(unique_slug(slug, found))
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


def test_the_anchor_rule_matches_myst() -> None:
    # A heading with emphasis, a section sign and an en dash, a repeated heading, and a level-4
    # heading (no anchor: deeper than myst_heading_anchors).
    page = "# Top\n\n## *2026-11-24* Patterns (Zounmevo 2014, §5.8, Figs 5.13–5.22)\n\n## Top\n"
    page += "```sh\n# a shell comment\n```\n#### Deep\n"
    assert anchors(page) == {"top", "2026-11-24-patterns-zounmevo-2014-58-figs-513522", "top-1"}


def test_the_anchor_levels_are_the_builds() -> None:
    conf = (ROOT / "docs" / "conf.py").read_text(encoding="utf-8")
    assert f"myst_heading_anchors = {ANCHOR_LEVELS}\n" in conf


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


DIRECTIVE = re.compile(r"^\.\. auto(?:class|function|module|data|exception|attribute)::\s+(\S+)\s*$")
OPTION = re.compile(r"^\s+:([\w-]+):\s*(.*)$")


def api_directives() -> list[tuple[str, dict[str, str]]]:
    """Every autodoc directive of docs/api/ (inside its ```{eval-rst} blocks): (name, options)."""
    found: list[tuple[str, dict[str, str]]] = []
    for page in sorted((ROOT / "docs" / "api").glob("*.md")):
        for line in page.read_text(encoding="utf-8").splitlines():
            if match := DIRECTIVE.match(line):
                found.append((match[1], {}))
            elif found and (option := OPTION.match(line)):
                found[-1][1][option[1]] = option[2]
    return found


def resolve(name: str) -> object:
    module_name, obj = name, None
    while obj is None:
        try:
            obj = importlib.import_module(module_name)
        except ImportError:
            module_name = module_name.rpartition(".")[0]
    for attribute in name[len(module_name) :].split(".")[1:]:
        obj = getattr(obj, attribute)
    return obj


def api_objects() -> list[tuple[str, object]]:
    """Every object the API reference renders (autodoc directives in docs/api/), with its public
    members (those a ``:members:`` option lists, else all), as (dotted name, object)."""
    found: list[tuple[str, object]] = []
    for name, options in api_directives():
        obj = resolve(name)
        found.append((name, obj))
        if inspect.isclass(obj) or inspect.ismodule(obj):
            chosen = [m.strip() for m in options.get("members", "").split(",") if m.strip()]
            members = {k: v for k, v in vars(obj).items() if not k.startswith("_")}
            if chosen:
                members = {k: members[k] for k in chosen}
            found += [(f"{name}.{k}", v) for k, v in members.items()]
    return found


def test_the_reference_documents_every_public_name() -> None:
    # A public class or function has an entry of its own (directly or as a member of a documented
    # module); a constant is at least named on a reference page.
    documented = {id(obj) for _, obj in api_objects()}
    pages = "".join(page.read_text(encoding="utf-8") for page in (ROOT / "docs" / "api").glob("*.md"))
    missing = [
        name
        for name in aiorma.__all__
        if not (
            id(obj := getattr(aiorma, name)) in documented or (not callable(obj) and f"`{name}`" in pages)
        )
    ]
    assert missing == []


TOCTREE = re.compile(r"^```\{toctree\}\n(.*?)^```", re.M | re.S)


def toctree_entries() -> list[str]:
    """The pages the site's table of contents lists (docs/index.md's toctrees), as paths under docs/."""
    entries = []
    for block in TOCTREE.findall((ROOT / "docs" / "index.md").read_text(encoding="utf-8")):
        for line in block.splitlines():
            if line.strip() and not line.startswith(":"):
                target = re.sub(r"^.*<(.*)>$", r"\1", line.strip())
                entries.append(f"{target}.md")
    return entries


def test_every_page_is_in_the_table_of_contents_once() -> None:
    entries = toctree_entries()
    assert len(entries) > 20, "the scan found too little"
    assert sorted(set(entries)) == sorted(entries), "a page listed twice"
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")} - {"index.md"}
    assert sorted(entries) == sorted(pages)


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
