"""The layering of docs/design.md §4, as far as a test can see it.

The contract itself (which layer imports which) is checked by import-linter in ``make lint``
([tool.importlinter] in pyproject.toml). These tests prove what it cannot: that the core
really imports and works with pyspark absent, that no module reaches for another's private
name (imported, or as an attribute of another module's object), and that no module of the
engine package escapes the contract.
"""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tablestore"
# What docs/design.md calls the core: it must work without pyspark installed.
CORE = ("spec", "io", "catalog", "table", "maintenance")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules_under(*packages: str) -> list[str]:
    return sorted(module_name(p) for pkg in packages for p in (PACKAGE / pkg).rglob("*.py"))


def test_every_core_module_imports_with_pyspark_blocked_and_pyspark_stays_unimported() -> None:
    modules = [*modules_under(*CORE), "tablestore.names", "tablestore.errors", "tablestore.engine.protocols",
               "tablestore.engine.local", "tablestore.engine.sources"]
    assert len(modules) > 60  # the walk found the packages
    # A fresh interpreter in which importing pyspark fails as if it were not installed.
    script = textwrap.dedent(f"""
        import importlib, sys

        class NoPyspark:
            def find_spec(self, name, path=None, target=None):
                if name == "pyspark" or name.startswith("pyspark."):
                    raise ImportError(f"pyspark is blocked in this test ({{name}})")
                return None

        sys.meta_path.insert(0, NoPyspark())
        for name in {modules!r}:
            importlib.import_module(name)
        loaded = sorted(m for m in sys.modules if m == "pyspark" or m.startswith("pyspark."))
        print("pyspark modules:", loaded)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "pyspark modules: []"


def test_a_table_writes_reads_and_merges_columns_with_pyspark_blocked(tmp_path: Path) -> None:
    """Not just importable: the core's everyday work runs without pyspark (a merge source of
    pandas goes through the engine's DataFrame adapters, which must not reach for Spark's)."""
    script = textwrap.dedent(f"""
        import sys

        class NoPyspark:
            def find_spec(self, name, path=None, target=None):
                if name == "pyspark" or name.startswith("pyspark."):
                    raise ImportError("pyspark is blocked in this test")
                return None

        sys.meta_path.insert(0, NoPyspark())
        import pandas as pd
        import pyarrow as pa
        import tablestore

        catalog = tablestore.load_catalog("t", uri="sqlite:///{tmp_path}/c.db", warehouse="{tmp_path}/wh")
        catalog.create_namespace("db")
        table = catalog.create_table("db.t", pa.schema([("id", pa.int64()), ("v", pa.string())]))
        table.append(pa.table({{"id": [1, 2, 3], "v": ["a", "b", "c"]}}))
        table.merge_columns(pd.DataFrame({{"id": [1, 3], "w": [10, 30]}}), on="id")
        rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
        print(rows)
        print(sorted(m for m in sys.modules if m.startswith("pyspark")))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows, loaded = done.stdout.strip().splitlines()
    assert rows == ("[{'id': 1, 'v': 'a', 'w': 10}, {'id': 2, 'v': 'b', 'w': None}, "
                    "{'id': 3, 'v': 'c', 'w': 30}]")
    assert loaded == "[]"


def resolved(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def private_imports(root: Path = ROOT) -> list[str]:
    """``from tablestore.x import _name`` anywhere in ``root``/tablestore: one line per offence."""
    found = []
    for path in sorted((root / "tablestore").rglob("*.py")):
        module = module_name(path, root)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = resolved(module, path.name == "__init__.py", node)
            if not source.startswith("tablestore"):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports {alias.name} from {source}")
            if any(part.startswith("_") and not part.startswith("__") for part in source.split(".")):
                found.append(f"{path.relative_to(root)}:{node.lineno} imports from the private module {source}")
    return found


def test_no_module_imports_a_private_name_of_another() -> None:
    assert private_imports() == []


def test_the_private_import_check_sees_relative_absolute_and_private_module_imports(tmp_path: Path) -> None:
    """The check can fail: a package with each kind of offence, and imports that are allowed."""
    table = tmp_path / "tablestore" / "table"
    table.mkdir(parents=True)
    (tmp_path / "tablestore" / "__init__.py").write_text("")
    (table / "__init__.py").write_text("from .write import _helper\n")
    (table / "write.py").write_text("def _helper() -> None: ...\n")
    (table / "writers.py").write_text(
        "from __future__ import annotations\n"
        "from ..table.write import _runs, public\n"
        "from tablestore.table._private import x\n"
        "from tablestore.table.write import __all__\n"
        "from os import _exit\n"
    )
    assert private_imports(tmp_path) == [
        "tablestore/table/__init__.py:1 imports _helper from tablestore.table.write",
        "tablestore/table/writers.py:2 imports _runs from tablestore.table.write",
        "tablestore/table/writers.py:3 imports from the private module tablestore.table._private",
    ]


# The packages of the project: every check over "the project" walks these.
PROJECT = ("tablestore", "pipelines", "quality", "infra")


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_names_defined(tree: ast.Module) -> set[str]:
    """The private names a module defines: functions, classes and methods, and what it assigns,
    as a variable or as an attribute (``self._cache = ...``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        names.add(sub.id)
                    elif isinstance(sub, ast.Attribute):
                        names.add(sub.attr)
    return {n for n in names if is_private(n)}


def private_attributes(root: Path = ROOT, packages: tuple[str, ...] = PROJECT) -> list[str]:
    """``obj._name`` where ``obj`` is not ``self``, ``cls`` or ``super()`` and ``_name`` is defined
    by another module of the project but not by this one: one ``path: expression (defined in
    ...)`` per offence. A name the project never defines is another library's (``df._jdf``)."""
    trees = {
        path: ast.parse(path.read_text(), str(path))
        for package in packages if (root / package).is_dir()
        for path in sorted((root / package).rglob("*.py"))
    }
    defined = {path: private_names_defined(tree) for path, tree in trees.items()}
    found = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not is_private(node.attr) or node.attr in defined[path]:
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
                continue
            owners = sorted(str(p.relative_to(root)) for p, names in defined.items() if node.attr in names)
            if owners:
                found.append(f"{path.relative_to(root)}: {ast.unparse(node)} (defined in {', '.join(owners)})")
    return found


# Private attributes still reached across modules, each with why it is allowed for now.
PRIVATE_ATTRIBUTES_ALLOWED: dict[str, str] = {}


def test_no_module_reaches_for_a_private_attribute_of_another_modules_objects() -> None:
    found = [line.split(" (defined in")[0] for line in private_attributes()]
    assert [f for f in found if f not in PRIVATE_ATTRIBUTES_ALLOWED] == []
    # An entry nothing needs any more is deleted, so the list only shrinks.
    assert [a for a in PRIVATE_ATTRIBUTES_ALLOWED if a not in found] == []


def test_the_private_attribute_check_sees_other_modules_names_only(tmp_path: Path) -> None:
    """The check can fail: a reach into another module's object, beside what is allowed (its own
    names, self, cls, super(), and private names of other libraries)."""
    package = tmp_path / "tablestore"
    package.mkdir()
    (package / "table.py").write_text(
        "class Table:\n"
        "    def __init__(self) -> None:\n"
        "        self._cache = {}\n"
        "    def _commit(self) -> None: ...\n"
    )
    (package / "catalog.py").write_text(
        "class Served(Base):\n"
        "    def go(self, table, df, other) -> None:\n"
        "        table._commit()\n"
        "        table.io._cache.clear()\n"
        "        self._commit(); super()._commit(); df._jdf; other._mine\n"
        "    def _mine(self) -> None: ...\n"
    )
    assert private_attributes(tmp_path, ("tablestore",)) == [
        "tablestore/catalog.py: table._commit (defined in tablestore/table.py)",
        "tablestore/catalog.py: table.io._cache (defined in tablestore/table.py)",
    ]


# -- import cycles -----------------------------------------------------------------------------

# Import cycles between modules that other work in progress removes, each with who removes it.
# A cycle passes while all its modules are in one entry; an entry no cycle needs fails the test,
# so that it is deleted as soon as the cycle is gone (the list only shrinks).
KNOWN_CYCLES: dict[frozenset[str], str] = {}


def strongly_connected(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The import cycles of a graph: its strongly connected sets of two or more modules, sorted
    (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in edges.get(module, ()):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, 10 * len(edges) + 100))
    try:
        for module in sorted(edges):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(previous)
    return sorted(found)


def import_cycles(packages: tuple[str, ...] = PROJECT) -> list[tuple[list[str], str]]:
    """Every import cycle between modules of ``packages``, as import-linter sees imports (those
    inside functions count, those under ``if TYPE_CHECKING:`` do not), with one shortest loop
    through it spelled out: ``a -> b (a.py:12) -> a (b.py:3)``."""
    graph = grimp.build_graph(*packages, exclude_type_checking_imports=True)
    inside = {m for m in graph.modules if m.split(".")[0] in packages}
    edges = {m: sorted(i for i in graph.find_modules_directly_imported_by(m) if i in inside) for m in inside}
    cycles = []
    for component in strongly_connected(edges):
        first = component[0]
        # The shortest way back to the first module from one it imports, within the cycle.
        loops = [graph.find_shortest_chain(importer=i, imported=first) for i in edges[first] if i in component]
        chain = (first, *min((c for c in loops if c), key=len))
        steps = [first]
        for importer, imported in itertools.pairwise(chain):
            line = graph.get_import_details(importer=importer, imported=imported)[0]["line_number"]
            steps.append(f"{imported} ({importer}:{line})")
        cycles.append((component, " -> ".join(steps)))
    return cycles


def test_no_import_cycle_between_any_two_modules_of_the_project() -> None:
    cycles = import_cycles()
    unknown = [loop for component, loop in cycles
               if not any(set(component) <= known for known in KNOWN_CYCLES)]
    remaining = [f"{sorted(known)} ({owner})" for known, owner in KNOWN_CYCLES.items()
                 if any(set(component) <= known for component, _ in cycles)]
    assert unknown == [], "import cycles (break each):\n" + "\n".join(unknown) + (
        "\nknown cycles that remain, being removed:\n" + "\n".join(remaining) if remaining else "")
    stale = [f"{sorted(known)} ({owner})" for known, owner in KNOWN_CYCLES.items()
             if not any(set(component) <= known for component, _ in cycles)]
    assert stale == [], "these cycles are gone: delete their entries from KNOWN_CYCLES\n" + "\n".join(stale)


def test_the_cycle_check_finds_cycles_through_function_level_imports_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check can fail: a cycle closed by an import inside a function is found, one closed
    only under ``if TYPE_CHECKING:`` is not, and a module outside every cycle is left out."""
    package = tmp_path / "cyclecheck_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclecheck_pkg.b import f\n")
    (package / "b.py").write_text("def f() -> None:\n    from cyclecheck_pkg import a\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nfrom cyclecheck_pkg import a\nif TYPE_CHECKING:\n    from cyclecheck_pkg import d\n"
    )
    (package / "d.py").write_text("from cyclecheck_pkg import c\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles(("cyclecheck_pkg",)) == [(
        ["cyclecheck_pkg.a", "cyclecheck_pkg.b"],
        "cyclecheck_pkg.a -> cyclecheck_pkg.b (cyclecheck_pkg.a:1) -> cyclecheck_pkg.a (cyclecheck_pkg.b:2)",
    )]
    assert strongly_connected({"x": ["y"], "y": ["z"], "z": ["x", "w"], "w": []}) == [["x", "y", "z"]]


def package_at(module: str, depth: int) -> str:
    """The package that holds ``module`` ``depth`` levels below the root package, or the module
    itself when it is no deeper than that: ``tablestore.spark.tasks.write_files`` is
    ``tablestore.spark`` at depth 1 and ``tablestore.spark.tasks`` at depth 2."""
    return ".".join(module.split(".")[: depth + 1])


def package_cycles(packages: tuple[str, ...] = PROJECT) -> list[str]:
    """Every import cycle between packages of ``packages`` at any depth (sibling packages and
    modules under one parent, and under the root: ``tablestore.catalog -> tablestore.table ->
    tablestore.engine -> tablestore.catalog``), as import-linter sees imports (those inside
    functions count, those under ``if TYPE_CHECKING:`` do not). One line per cycle: the
    packages of a shortest loop, each step with an import that makes it (``importer:line``).

    A package's ``__main__`` is left out: it is a program that is run (``python -m
    infra.images``), never imported, so it stands above every package, its own included."""
    graph = grimp.build_graph(*packages, exclude_type_checking_imports=True)
    inside = {m for m in graph.modules if m.split(".")[0] in packages and not m.endswith(".__main__")}
    imports = [(m, i) for m in sorted(inside) for i in sorted(graph.find_modules_directly_imported_by(m)) if i in inside]
    found = []
    for depth in range(1, max(len(m.split(".")) for m in inside)):
        # package -> package it imports -> one module import that makes the step
        steps: dict[str, dict[str, tuple[str, str]]] = {}
        for importer, imported in imports:
            a, b = package_at(importer, depth), package_at(imported, depth)
            # Only siblings: a package and what it holds are one at a shallower depth.
            if a != b and a.rsplit(".", 1)[0] == b.rsplit(".", 1)[0] and "." in a:
                steps.setdefault(a, {}).setdefault(b, (importer, imported))
        for component in strongly_connected({a: sorted(b) for a, b in steps.items()}):
            first = component[0]
            # Breadth first from what ``first`` imports back to ``first``, within the cycle.
            previous: dict[str, str] = {}
            queue = [first]
            while queue and first not in previous:
                current = queue.pop(0)
                for nxt in sorted(steps.get(current, {})):
                    if nxt in component and nxt not in previous:
                        previous[nxt] = current
                        queue.append(nxt)
            loop = [first]
            while len(loop) == 1 or loop[-1] != first:
                loop.append(previous[loop[-1]])
            loop.reverse()
            parts = [first]
            for a, b in itertools.pairwise(loop):
                importer, imported = steps[a][b]
                line = graph.get_import_details(importer=importer, imported=imported)[0]["line_number"]
                parts.append(f"{b} ({importer}:{line})")
            found.append(" -> ".join(parts))
    return found


def test_no_import_cycle_between_any_two_packages_of_the_project() -> None:
    """Modules without a cycle can still make packages with one (a module of ``catalog`` imports
    ``table``, which imports ``engine``, a module of which imports ``catalog``): packages are
    layers only when no loop runs through them, at every depth."""
    assert package_cycles() == [], "import cycles between packages (break each):\n" + "\n".join(package_cycles())


def test_the_package_cycle_check_finds_cycles_between_packages_made_of_acyclic_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check can fail: ``low.a -> high.b -> low.c`` has no module cycle but a package cycle,
    closed by an import inside a function; one closed only under ``if TYPE_CHECKING:`` (``other``)
    is not, and a package that imports its own modules is no cycle."""
    package = tmp_path / "pkgcycle_pkg"
    for sub in ("low", "high", "other"):
        (package / sub).mkdir(parents=True)
        (package / sub / "__init__.py").write_text("")
    (package / "__init__.py").write_text("from pkgcycle_pkg.low import a\n")
    (package / "low" / "a.py").write_text("def f() -> None:\n    from pkgcycle_pkg.high import b\n")
    (package / "low" / "c.py").write_text("X = 1\n")
    (package / "high" / "b.py").write_text("from pkgcycle_pkg.low import c\n")
    (package / "other" / "d.py").write_text(
        "from typing import TYPE_CHECKING\nfrom pkgcycle_pkg.low import c\nif TYPE_CHECKING:\n    from pkgcycle_pkg.high import b\n"
    )
    (package / "high" / "e.py").write_text("from pkgcycle_pkg.other import d\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert package_cycles(("pkgcycle_pkg",)) == [
        "pkgcycle_pkg.high -> pkgcycle_pkg.low (pkgcycle_pkg.high.b:1) -> pkgcycle_pkg.high (pkgcycle_pkg.low.a:2)",
    ]
    assert import_cycles(("pkgcycle_pkg",)) == []


def test_the_package_cycle_check_sees_subpackages_of_subpackages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check can fail two levels down, where the rooms of ``tablestore.spec`` are: two
    subpackages of one package that import each other (one of them lazily) form a cycle."""
    package = tmp_path / "deepcycle_pkg"
    for sub in ("spec", "spec/schemas", "spec/manifests"):
        (package / sub).mkdir(parents=True)
        (package / sub / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "spec" / "schemas" / "types.py").write_text("def f() -> None:\n    from deepcycle_pkg.spec.manifests import avro\n")
    (package / "spec" / "manifests" / "avro.py").write_text("from deepcycle_pkg.spec.schemas import types\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert package_cycles(("deepcycle_pkg",)) == [
        "deepcycle_pkg.spec.manifests -> deepcycle_pkg.spec.schemas (deepcycle_pkg.spec.manifests.avro:1)"
        " -> deepcycle_pkg.spec.manifests (deepcycle_pkg.spec.schemas.types:2)",
    ]


def top_level_names(tree: ast.Module) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments); what it
    imports is not among them."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(sub.id for sub in ast.walk(target) if isinstance(sub, ast.Name))
    return names


# The one name passed on on purpose: the commit path, tablestore.table.update, is table/'s own (an
# import contract of pyproject.toml forbids it to the rest of the house), and a caller names who
# makes a commit with CommitIdentity through the Table API. So its one path outside table/ is
# tablestore.table, and inside table/ its module.
TABLE_API = {"tablestore.table": {"CommitIdentity"}}


def imports_of_names_not_from_their_module(
    root: Path = ROOT, packages: tuple[str, ...] = PROJECT, importers: tuple[str, ...] = (*PROJECT, "tests", "bench"),
    passed_on: dict[str, set[str]] = TABLE_API,
) -> list[str]:
    """``from M import name``, M a module of ``packages``, where ``name`` is neither defined by
    ``M`` nor a module of ``M``: one ``path:line name from M`` per offence, in every module of
    ``importers``. Every name of the house has one import path, the module that defines it; a
    module (a package's ``__init__.py`` above all) that passes on names it imports would make a
    second one, and a reader would have to search for where a name really lives."""
    defined = {
        module_name(p, root): top_level_names(ast.parse(p.read_text(), str(p)))
        for package in packages if (root / package).is_dir() for p in (root / package).rglob("*.py")
    }
    found = []
    for package in importers:
        for path in sorted((root / package).rglob("*.py")) if (root / package).is_dir() else []:
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.ImportFrom) or node.level or (node.module or "") not in defined:
                    continue
                source = node.module or ""
                inside = module_name(path, root).startswith(f"{source}.")
                for alias in node.names:
                    if alias.name in passed_on.get(source, set()) and not inside:
                        continue
                    if alias.name not in defined[source] and f"{source}.{alias.name}" not in defined:
                        found.append(f"{path.relative_to(root)}:{node.lineno} {alias.name} from {source}")
    return found


def test_every_name_of_the_spec_is_in_a_room() -> None:
    """spec/ holds only its rooms (subpackages with empty ``__init__.py``)."""
    spec = PACKAGE / "spec"
    assert sorted(p.name for p in spec.iterdir() if p.name != "__pycache__") == [
        "__init__.py", "expressions", "manifests", "metadata", "partitioning", "schemas"]
    assert [str(p.relative_to(ROOT)) for p in spec.rglob("__init__.py") if p.read_text().strip()] == []


def test_every_name_of_the_house_has_one_import_path() -> None:
    """Every import of a name of tablestore, pipelines, quality or infra, by them, the tests or
    the benchmarks, is from the module that defines it: ``Catalog`` from ``catalog.base``, not
    also from ``catalog``; ``FileIO`` from ``io.fileio``; ``write_dataframe`` from
    ``spark.native.native_write``. (The top package ``tablestore`` names a few for users, and
    nothing in the house imports through it.)"""
    assert imports_of_names_not_from_their_module() == []


def test_the_one_import_path_check_sees_a_name_passed_on(tmp_path: Path) -> None:
    """The check can fail: a name imported from a module that only imports it is found, in a
    room of the spec as in a package's ``__init__.py``; a name the module defines, and a module
    of a package, are not."""
    rooms = tmp_path / "tablestore" / "spec" / "schemas"
    rooms.mkdir(parents=True)
    for init in (tmp_path / "tablestore", tmp_path / "tablestore" / "spec", rooms):
        (init / "__init__.py").write_text("")
    (rooms / "types.py").write_text("class LongType: ...\nLIMIT: int = 3\n")
    (rooms / "schema.py").write_text("from tablestore.spec.schemas.types import LongType\nclass Schema: ...\n")
    catalog = tmp_path / "tablestore" / "catalog"
    catalog.mkdir()
    (catalog / "base.py").write_text("class Catalog: ...\n")
    (catalog / "__init__.py").write_text("from tablestore.catalog.base import Catalog\ndef load_catalog() -> None: ...\n")
    (tmp_path / "tablestore" / "user.py").write_text(
        "from tablestore.spec.schemas.schema import LongType, Schema\n"
        "from tablestore.spec.schemas.types import LIMIT\n"
        "from tablestore.spec.schemas import types\n"
        "def f() -> None:\n"
        "    from tablestore.catalog import Catalog, load_catalog\n"
        "    from tablestore.catalog.base import Catalog as Base\n"
    )
    assert imports_of_names_not_from_their_module(tmp_path, ("tablestore",), ("tablestore",)) == [
        "tablestore/user.py:1 LongType from tablestore.spec.schemas.schema",
        "tablestore/user.py:5 Catalog from tablestore.catalog",
    ]


def contract_modules() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    # Every layers contract of the project (one naming a container, as table/'s own layers do,
    # names its layers relative to it and is left out).
    layers = [
        layer
        for c in config["contracts"]
        if c["type"] == "layers" and "containers" not in c
        for layer in c["layers"]
    ]
    return {m.strip() for layer in layers for m in layer.replace("|", ":").split(":")}


def test_the_engines_are_two_layers_of_the_contract() -> None:
    """The engine-neutral package (protocols, the local engine, DataFrame adapters) is one layer
    below the table layer, the Spark engine a package of its own above it, each named as a whole
    so that a new module of either is in its layer."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c["layers"] for c in config["contracts"] if c["name"] == "Layers of docs/design.md §4")
    names = [{m.strip() for m in layer.replace("|", ":").split(":")} for layer in layers]
    position = {m: i for i, layer in enumerate(names) for m in layer}
    assert position["tablestore.sql"] < position["tablestore.spark"] < position["tablestore.catalog"]
    assert position["tablestore.table"] < position["tablestore.engine"] < position["tablestore.io"]
    assert not [n for n in contract_modules() if n.startswith(("tablestore.engine.", "tablestore.spark."))]
    assert not (PACKAGE / "engine" / "spark").exists()


# -- who may delete a written file (tablestore.table.update.commit_outcome) ------------------------

# The one guard that deletes files when a write fails (and never on an unknown commit outcome),
# and the one commit that cleans up a snapshot's files when it surely did not land.
CLEANUP_OWNERS = {"tablestore/io/cleanup.py", "tablestore/table/update/transaction.py"}
DELETING = ("delete", "discard", "remove", "unlink", "rmtree", "cleanup", "purge")


def broad_handlers_that_delete(root: Path = ROOT, packages: tuple[str, ...] = PROJECT) -> list[str]:
    """``except BaseException`` (or a bare ``except``) handlers whose body calls something that
    deletes (by name), outside the modules that own cleanup."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            text = path.read_text()
            if relative in CLEANUP_OWNERS or ("BaseException" not in text and "except:" not in text):
                continue
            for node in ast.walk(ast.parse(text)):
                if not isinstance(node, ast.ExceptHandler):
                    continue
                broad = node.type is None or (isinstance(node.type, ast.Name) and node.type.id == "BaseException")
                if not broad:
                    continue
                for call in (n for statement in node.body for n in ast.walk(statement) if isinstance(n, ast.Call)):
                    func = call.func
                    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                    if any(word in name.lower() for word in DELETING):
                        found.append(f"{relative}:{node.lineno} calls {name}()")
    return found


def test_no_broad_except_deletes_files_outside_the_commit_path() -> None:
    # A write's files may be referenced by a commit whose answer was lost; only
    # tablestore.io.cleanup.deleted_unless_sent and the Transaction's commit tell the outcomes apart.
    assert broad_handlers_that_delete() == []


def test_the_cleanup_check_sees_broad_handlers_that_delete(tmp_path: Path) -> None:
    package = tmp_path / "cleanupcheck_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "w.py").write_text(textwrap.dedent("""
        def write(io, path):
            try:
                commit()
            except BaseException:
                io.delete(path)
                raise

        def fine(io, path):
            try:
                commit()
            except ValueError:
                io.delete(path)
                raise
    """))
    assert broad_handlers_that_delete(tmp_path, ("cleanupcheck_pkg",)) == ["cleanupcheck_pkg/w.py:5 calls delete()"]
