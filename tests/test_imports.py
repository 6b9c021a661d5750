"""The import graph of ``src/ppdp``: no cycles (type-only imports included), dependencies point
down, no private names cross a module boundary (DESIGN.md, "target layout"); and the modules
themselves: none over 1,000 lines, every one named in docs/architecture.md.

The graph is read from the source with :mod:`ast`, not by importing: every ``import`` and
``from … import`` statement counts, at module level and inside functions and methods alike,
relative or absolute; ``from . import x`` is an edge to the submodule ``x`` when there is one
and to the package otherwise. Only imports under ``if TYPE_CHECKING:`` are left out (they
never run). ``registry`` loading plugin packages by module-name string is not an import
statement and so is not an edge.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "ppdp"

# Layers, lowest first: a module may import from its own layer or any layer below it.
LAYERS: list[tuple[str, ...]] = [
    ("errors",),
    ("validation",),
    ("registry",),
    ("table", "schema", "datasets"),
    ("metrics", "provenance", "kernels"),
    ("queries",),
    ("claims",),
    ("releases",),
    ("estimators",),
    ("mechanisms",),
    ("engines",),
    ("api", ""),  # "": the package itself, ppdp/__init__.py, the public face of api
    ("audit", "evaluate", "report", "experiments"),
    ("cli", "app", "__main__"),  # app: the local web app, built on the CLI's verbs
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}


@dataclass(frozen=True)
class Edge:
    src: str        # importing module
    dst: str        # imported ppdp module (package or submodule)
    names: tuple    # names taken from dst (``from dst import a, b``); () for ``import dst``
    line: int

    def __str__(self) -> str:
        what = f" ({', '.join(self.names)})" if self.names else ""
        return f"{self.src} -> {self.dst}{what}  [{_path(self.src)}:{self.line}]"


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted((SRC / ROOT).rglob("*.py")):
        parts = list(p.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def _path(mod: str) -> str:
    return str(MODULES[mod].relative_to(SRC.parent))


def _is_package(mod: str) -> bool:
    return MODULES[mod].name == "__init__.py"


def _package_bindings(pkg: str) -> set[str]:
    """Names a package's ``__init__`` binds itself at module level (def, class, assignment,
    ``from x import name``). ``from pkg import name`` takes these before any submodule
    ``pkg.name``, as Python's import does (getattr first, then the submodule)."""
    tree = ast.parse(MODULES[pkg].read_text())
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                out.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.ImportFrom) and not (node.level == 1 and node.module is None):
            out.update(a.asname or a.name for a in node.names)
    return out


def _resolve_from(package: str, node: ast.ImportFrom) -> str:
    """The absolute module name ``from <…> import`` refers to, seen from ``package``."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _submodule(base: str, name: str) -> str | None:
    """``from base import name`` names the submodule ``base.name`` (or not)."""
    sub = f"{base}.{name}"
    if sub not in MODULES or (base in MODULES and name in _package_bindings(base)):
        return None
    return sub


def _nearest_module(name: str) -> str | None:
    """The longest prefix of a dotted name that is a ppdp module."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in MODULES:
            return cand
        parts.pop()
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST, type_checking: bool = False):
    """Every Import/ImportFrom node, skipping the bodies of ``if TYPE_CHECKING:`` unless
    ``type_checking`` (type-only imports count for cycles: a cycle through them is still a
    cycle in the design, and a checker or a refactor turns it into a real one)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not type_checking:
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _edges_of(mod: str, type_checking: bool = False) -> list[Edge]:
    tree = ast.parse(MODULES[mod].read_text(), filename=str(MODULES[mod]))
    package = mod if _is_package(mod) else mod.rpartition(".")[0]
    edges = []
    for node in _import_nodes(tree, type_checking):
        if isinstance(node, ast.Import):
            for alias in node.names:
                dst = _nearest_module(alias.name)
                if dst is not None and dst != mod:
                    edges.append(Edge(mod, dst, (), node.lineno))
            continue
        base = _resolve_from(package, node)
        if base != ROOT and not base.startswith(ROOT + "."):
            continue
        plain = []
        for alias in node.names:
            sub = _submodule(base, alias.name)
            if sub is not None:  # ``from pkg import submodule``
                edges.append(Edge(mod, sub, (), node.lineno))
            else:
                plain.append(alias.name)
        if plain:
            dst = _nearest_module(base)
            if dst is not None and dst != mod:
                edges.append(Edge(mod, dst, tuple(plain), node.lineno))
    return edges


def import_graph(type_checking: bool = False) -> dict[str, list[Edge]]:
    return {m: _edges_of(m, type_checking) for m in MODULES}


def find_cycles(graph: dict[str, list[Edge]]) -> list[list[Edge]]:
    """One cycle (as a list of edges) for every strongly connected component that has one."""
    adj = {m: sorted({e.dst for e in es}) for m, es in graph.items()}
    index, low, on_stack, stack, sccs = {}, {}, set(), [], []
    counter = [0]

    def strongconnect(v):  # Tarjan; recursion depth is bounded by the number of modules
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in adj[v]:
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in adj[v]:
                sccs.append(set(comp))

    for v in sorted(adj):
        if v not in index:
            strongconnect(v)

    cycles = []
    for comp in sccs:
        start = min(comp)
        # breadth-first search inside the component for the shortest way back to start
        prev = {start: None}
        frontier = [start]
        found = None
        while frontier and found is None:
            nxt = []
            for v in frontier:
                for e in graph[v]:
                    if e.dst not in comp:
                        continue
                    if e.dst == start:
                        found = e
                        break
                    if e.dst not in prev:
                        prev[e.dst] = e
                        nxt.append(e.dst)
                if found:
                    break
            frontier = nxt
        path = [found]
        while prev[path[-1].src] is not None:
            path.append(prev[path[-1].src])
        cycles.append(path[::-1])
    return cycles


def _top(mod: str) -> str:
    """The first name under ppdp (``ppdp.releases.base`` → ``releases``; ``ppdp`` → ``""``)."""
    return mod.split(".")[1] if "." in mod else ""


def _layer(mod: str) -> int:
    assert _top(mod) in RANK, f"{mod}: not in the layer list of tests/test_imports.py; add it to LAYERS"
    return RANK[_top(mod)]


def layering_violations(graph: dict[str, list[Edge]]) -> list[str]:
    out = []
    for mod, edges in graph.items():
        for e in edges:
            if _top(e.src) == _top(e.dst):
                continue
            if _layer(e.dst) > _layer(e.src):
                out.append(f"upward import: {e}")
    return out


def private_name_violations(graph: dict[str, list[Edge]]) -> list[str]:
    """``from other import _name`` and ``other_module._name`` across a module boundary.

    Dunder names (``__version__``) are public. Attribute access is checked on names bound by
    an import of a ppdp module (``from . import noise`` … ``noise._draw``); attributes of
    objects are out of reach of a static walk.
    """
    out = []
    for mod, edges in graph.items():
        for e in edges:
            for n in e.names:
                if n.startswith("_") and not n.startswith("__"):
                    out.append(f"private name {n!r}: {e}")
        tree = ast.parse(MODULES[mod].read_text())
        module_aliases = {}
        package = mod if _is_package(mod) else mod.rpartition(".")[0]
        for node in _import_nodes(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in MODULES and a.asname:
                        module_aliases[a.asname] = a.name
            elif isinstance(node, ast.ImportFrom):
                base = _resolve_from(package, node)
                for a in node.names:
                    sub = _submodule(base, a.name)
                    if sub is not None:
                        module_aliases[a.asname or a.name] = sub
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in module_aliases and node.attr.startswith("_")
                    and not node.attr.startswith("__") and module_aliases[node.value.id] != mod):
                out.append(f"private name {node.attr!r}: {mod} uses {module_aliases[node.value.id]}.{node.attr}"
                           f"  [{_path(mod)}:{node.lineno}]")
    return out


def test_the_walk_sees_every_kind_of_import():
    g = import_graph()
    dst = {m: {e.dst for e in es} for m, es in g.items()}
    assert len(MODULES) > 30
    assert "ppdp.queries.model" in dst["ppdp.queries.parser"]            # relative, module level
    assert "ppdp.queries.workloads" in dst["ppdp.evaluate"]              # relative, inside a function
    assert "ppdp.datasets" in dst["ppdp"]                                # ``from . import submodule``
    assert "ppdp.cli" in dst["ppdp.cli.reproduce"]                       # a name the package binds wins
    assert "ppdp.cli.reproduce" not in dst["ppdp.cli.reproduce"]         # … over the submodule
    snippet = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\nelse:\n    import b\n"
                        "def f():\n    import c\n")
    seen = {a.name for n in _import_nodes(snippet) for a in n.names}
    assert seen == {"TYPE_CHECKING", "b", "c"}                          # TYPE_CHECKING blocks skipped
    seen = {a.name for n in _import_nodes(snippet, type_checking=True) for a in n.names}
    assert seen == {"TYPE_CHECKING", "a", "b", "c"}                     # ... but seen by the cycle check
    for m in MODULES:  # every module of the package has a layer
        _layer(m)


def test_no_import_cycles():
    cycles = find_cycles(import_graph(type_checking=True))
    msg = "\n\n".join("import cycle:\n  " + "\n  ".join(str(e) for e in c) for c in cycles)
    assert not cycles, msg


def test_dependencies_point_down_and_private_names_stay_private():
    g = import_graph()
    problems = layering_violations(g) + private_name_violations(g)
    assert not problems, "\n".join(problems)


#: the most lines a module under src/ppdp may hold (split by concept beyond it)
MAX_LINES = 1000
#: modules allowed past MAX_LINES, relative to src/ppdp (none)
OVERSIZE_EXEMPT: set[str] = set()
ARCHITECTURE = SRC.parent / "docs" / "architecture.md"


def _relative(mod: str) -> str:
    return MODULES[mod].relative_to(SRC / ROOT).as_posix()


def oversize_modules(limit: int = MAX_LINES, exempt=OVERSIZE_EXEMPT) -> list[str]:
    out = []
    for mod in MODULES:
        n = len(MODULES[mod].read_text().splitlines())
        if n > limit and _relative(mod) not in exempt:
            out.append(f"{_relative(mod)}: {n} lines > {limit}; split it by concept")
    return out


def test_no_module_over_the_line_limit():
    problems = oversize_modules()
    assert not problems, "\n".join(problems)


def test_the_size_check_has_power():
    """A tighter limit flags modules, and the exemption list holds only modules that exist."""
    assert oversize_modules(limit=100, exempt=set())
    assert {_relative(m) for m in MODULES} >= OVERSIZE_EXEMPT


def modules_missing_from_architecture(text: str) -> list[str]:
    """Every module's path under src/ppdp (``releases/bucketized.py``; a package's
    ``__init__.py`` as ``releases/``) must appear in docs/architecture.md."""
    out = []
    for mod in MODULES:
        rel = _relative(mod)
        name = rel[: -len("__init__.py")] if rel.endswith("/__init__.py") else rel
        if rel != "__init__.py" and f"`{name}`" not in text:
            out.append(name)
    return out


def test_architecture_page_names_every_module():
    missing = modules_missing_from_architecture(ARCHITECTURE.read_text())
    assert not missing, "docs/architecture.md does not name these modules (add them to its module index):\n" + "\n".join(missing)
    assert modules_missing_from_architecture("")  # the check has power
