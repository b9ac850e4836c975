"""The documentation stands on its own: README, docs/, examples/, the package and the tests' names,
docstrings and comments never send a reader to a document the repository does not ship (the
internal design brief, or the source papers by their file numbers).  Papers are cited by author and
year (docs/references.md), rules by their number in docs/semantics.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MISSING = re.compile(
    r"\bDESIGN\b|(?i:design brief|\bseeds? ?0\d\d\b|\bseed ?§|\bseed's\b|\bseed Figs?\b|shared/seeds"
    r"|\btest_seed_\d)"
)


def _texts() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    files += sorted((ROOT / "aiorma").rglob("*.py")) + sorted((ROOT / "examples").rglob("*.py"))
    files += [path for path in sorted((ROOT / "tests").rglob("*.py")) if path.name != Path(__file__).name]
    return files


def test_no_reference_to_documents_the_repository_does_not_ship() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _texts()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if MISSING.search(line)
    ]
    assert found == [], "\n".join(found)


def test_every_cited_paper_is_on_the_references_page() -> None:
    references = (ROOT / "docs" / "references.md").read_text(encoding="utf-8")
    for author in (
        "Zounmevo (2014)",
        "Mamidala (2008)",
        "Hoefler, Siebert and Rehm (2007)",
        "Hoefler et al. (2006)",
        "Subramoni et al. (2011)",
    ):
        assert f"**{author}**" in references
