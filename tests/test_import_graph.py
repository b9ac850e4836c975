"""Imports only go down: the module graph of ``aiorma/`` has no cycle.

Every import counts — at module level, inside functions (lazy imports), and under
``if TYPE_CHECKING:`` — because each is a dependency a reader must follow.  Importing
``aiorma.a.b`` also runs the package ``aiorma.a``, so that is an edge too, except towards the
importer's own enclosing packages (a package's ``__init__`` re-exports its submodules by design).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "aiorma"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the aiorma modules and packages it imports."""
    files = {module_name(p): p for p in PACKAGE_ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        base = name if is_package else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    anchor = base.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    source = ".".join(anchor + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets.add(source)
                # ``from pkg import sub`` imports the submodule ``pkg.sub``
                targets.update(f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in files)
        ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        edges: set[str] = set()
        for target in targets:
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix in files and prefix not in ancestors and prefix != name:
                    edges.add(prefix)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle (as a path that returns to its start), or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_package_import_graph_has_no_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_checker_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_lazy_and_type_checking_imports() -> None:
    graph = import_graph()
    assert "aiorma.comm" in graph["aiorma.session"]  # a module-level import
    assert "aiorma._core.world" in graph["aiorma.comm"]
    assert "aiorma.transport.mpi" in graph["aiorma.session"]  # imported inside a function


ARCHITECTURE = PACKAGE_ROOT.parent / "docs" / "architecture.md"


def diagram_layers() -> list[list[str]]:
    """The stack drawn at the top of docs/architecture.md, top to bottom: per layer the modules
    or packages it names (``aiorma/session.py, runtime.py`` -> session, runtime)."""
    block = ARCHITECTURE.read_text().split("```", 2)[1]
    layers = []
    for line in block.splitlines():
        if line.startswith(" aiorma/"):
            names = line.split("   ")[0].strip().split(", ")
            layers.append([n.removeprefix("aiorma/").removesuffix(".py").removesuffix("/") for n in names])
    return layers


def test_the_architecture_diagram_is_the_import_graph() -> None:
    """Every import between modules of the drawn stack goes to the same layer or one below it."""
    layer_of = {name: i for i, names in enumerate(diagram_layers()) for name in names}
    assert {"comm", "_core/world", "window", "engine", "transport", "collectives"} <= set(layer_of)

    def layer(module: str) -> int | None:
        parts = module.split(".")
        if len(parts) > 2 and parts[1] == "_core":  # the private package's modules sit apart
            return layer_of.get(f"_core/{parts[2]}")
        return layer_of.get(parts[1]) if len(parts) > 1 else None

    upward = [
        (a, b)
        for a, targets in import_graph().items()
        for b in targets
        if layer(a) is not None and layer(b) is not None and layer(b) < layer(a)  # type: ignore[operator]
    ]
    assert upward == [], f"imports that go up the drawn stack: {upward}"
