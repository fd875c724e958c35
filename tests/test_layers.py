"""The layering of docs/design.md §4, as far as a test can see it.

The contract itself (which layer imports which) is checked by import-linter in ``make lint``
([tool.importlinter] in pyproject.toml). These tests prove what it cannot: that the core
really imports and works with pyspark absent, that no module reaches for another's private
name, and that no module of the engine package escapes the contract.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

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


def contract_modules() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    # The project's layers (the contract of table/'s own layers names its container instead).
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers" and "containers" not in c]
    return {m.strip() for layer in layers for m in layer.replace("|", ":").split(":")}


def test_every_module_of_the_engine_package_is_in_a_layer_of_the_contract() -> None:
    """The engine package is split between two layers by naming its modules, so a new module
    must be named too, or the contract would not check it."""
    named = contract_modules()
    engine = [m for m in modules_under("engine") if m != "tablestore.engine"]
    assert [m for m in engine if m not in named] == []
    assert {"tablestore.engine.spark", "tablestore.engine.protocols"} <= named
