"""Move the Spark engine into one package: ``tablestore/engine/spark*.py`` -> ``tablestore/engine/spark/``.

    python tools/restructure_engine.py [--check | --map]

``tablestore.engine.spark`` (spark.py) becomes the package's ``__init__.py``, so its public names
stay where they are; ``tablestore.engine.spark_<name>`` becomes ``tablestore.engine.spark.<name>``,
except ``spark_daemon`` (see ``MODULES``), which stays beside the package.
The script ``git mv``s the files still at their old paths and rewrites every mention of an old
module name or path in the repository's .py, .toml, .md, .cfg, .conf files and Makefile: imports,
module names in strings (Spark's ``spark.python.daemon.module``, the daemon's preloads, the
DataFrame adapters of ``engine/sources.py``, ``monkeypatch`` targets) and paths in documents.

It is idempotent: run again after a merge brings new files or new mentions of the old names, it
moves and rewrites only what is still old. ``--check`` changes nothing and exits 1 if something
would change (listing it).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "tablestore" / "engine"
PACKAGE = ENGINE / "spark"

# The modules of the Spark engine, by their name after "spark_". Not spark_daemon.py: Spark starts
# it with ``python -m`` as the daemon its Python workers fork from, and it must put the installed
# pyspark first on sys.path before anything imports pyspark; inside the package, the package's
# __init__ (spark.py, which imports pyspark) would run first.
MODULES = (
    "arrow", "column_merge", "convert", "native_read", "native_write", "result_stream",
    "row_level", "row_source", "source", "source_files", "source_options", "source_read", "source_write",
    "stream", "write_files",
)
OLD_TO_NEW = {
    "tablestore.engine.spark": "tablestore.engine.spark",
    **{f"tablestore.engine.spark_{m}": f"tablestore.engine.spark.{m}" for m in MODULES},
}
SUFFIXES = {".py", ".toml", ".md", ".cfg", ".conf"}
NAMES = {"Makefile"}
SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache",
             ".grimp_cache", ".hypothesis", "build", "dist"}

_ALTERNATIVES = "|".join(sorted(MODULES, key=len, reverse=True))
# Dotted module names: imports, strings, :mod: references. Not followed by a word character, so
# spark_source does not match inside spark_source_read.
_DOTTED = re.compile(rf"\btablestore\.engine\.spark_({_ALTERNATIVES})(?![\w])")
# Paths: tablestore/engine/spark_x.py, engine/spark_x.py, and the engine module itself.
_PATH = re.compile(rf"(?<![\w/])((?:tablestore/)?engine/)spark_({_ALTERNATIVES})\.py\b")
_ENGINE_PATH = re.compile(r"(?<![\w/])((?:tablestore/)?engine/)spark\.py\b")
# A bare file name in prose (`spark_row_level.py`), never part of a longer name or path.
_BARE = re.compile(rf"(?<![\w/.])spark_({_ALTERNATIVES})\.py\b")


def git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True)


def moves() -> list[tuple[Path, Path]]:
    """The files still at an old path, and where they go."""
    planned = []
    old_engine = ENGINE / "spark.py"
    if old_engine.exists():
        planned.append((old_engine, PACKAGE / "__init__.py"))
    for name in MODULES:
        old = ENGINE / f"spark_{name}.py"
        if old.exists():
            planned.append((old, PACKAGE / f"{name}.py"))
    return planned


def rewrite(text: str) -> str:
    text = _DOTTED.sub(r"tablestore.engine.spark.\1", text)
    text = _PATH.sub(r"\1spark/\2.py", text)
    text = _ENGINE_PATH.sub(r"\1spark/__init__.py", text)
    return _BARE.sub(r"spark/\1.py", text)


def files() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        if any(part in SKIP_DIRS for part in path.relative_to(ROOT).parts):
            continue
        if path.is_file() and (path.suffix in SUFFIXES or path.name in NAMES) and path != Path(__file__).resolve():
            found.append(path)
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if anything would change")
    parser.add_argument("--map", action="store_true", help="print the old and new module names and exit")
    args = parser.parse_args(argv)
    if args.map:
        print("\n".join(f"{old} -> {new}" for old, new in OLD_TO_NEW.items()))
        return 0

    pending = [f"move {old.relative_to(ROOT)} -> {new.relative_to(ROOT)}" for old, new in moves()]
    for old, new in moves():
        if new.exists():
            raise SystemExit(f"{new.relative_to(ROOT)} exists and {old.relative_to(ROOT)} too: merge them by hand")
    if not args.check:
        PACKAGE.mkdir(exist_ok=True)
        for old, new in moves():
            git("mv", str(old.relative_to(ROOT)), str(new.relative_to(ROOT)))
    for path in files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        new_text = rewrite(text)
        if new_text != text:
            pending.append(f"rewrite {path.relative_to(ROOT)}")
            if not args.check:
                path.write_text(new_text)
    print("\n".join(pending) if pending else "nothing to do: the engine is already restructured")
    return 1 if args.check and pending else 0


if __name__ == "__main__":
    sys.exit(main())
