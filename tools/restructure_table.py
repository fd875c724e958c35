"""Move ``tablestore/table``'s modules into its layers and rewrite every reference to them.

    .venv/bin/python tools/restructure_table.py     # anywhere in the repository; safe to run again

The layers (docs/design.md §4): ``table/ops`` (operations) above ``table/update`` (the commit
path) above ``table/read`` and ``table/write``. This script

1. ``git mv``s each module of :data:`FILE_MOVES` that still exists at its old path (so a branch
   merged later that still adds or edits a module at its old path is moved too), and
2. rewrites module names (``tablestore.table.scan``) and file paths (``tablestore/table/scan.py``)
   in every tracked ``.py``, ``.toml``, ``.md`` and ``.cfg`` file, from :data:`MODULE_MOVES`.

It is idempotent: the new names never match an old one. ``tablestore.table.read`` and
``tablestore.table.write`` were modules and are now packages: an import of them, or a path to
a name in them, is rewritten to their ``data_files`` module unless it names one of the
package's modules (the packages' ``__init__`` modules export nothing, so no import of the
package itself is meant); a mention in prose is left alone.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PACKAGE = "tablestore.table"

#: old module (relative to tablestore.table) -> new module.
MODULE_MOVES: dict[str, str] = {
    # read: planning, reading files, metadata tables
    "scan": "read.scan",
    "read": "read.data_files",
    "inspect": "read.inspect",
    "file_rows": "read.file_rows",
    "deletion_vectors": "read.deletion_vectors",
    # write: partitioned writers, conforming input, column metrics
    "write": "write.data_files",
    "writers": "write.writers",
    "conform": "write.conform",
    "metrics": "write.metrics",
    # update (the commit path): the type rewrite an UpdateSchema commits with its schema
    "schema_rewrite": "update.schema_rewrite",
    # ops: operations, above the commit path
    "row_level": "ops.row_level",
    "row_expressions": "ops.row_expressions",
    "position_deletes": "ops.position_deletes",
    "merge": "ops.merge",
    "overwrite": "ops.overwrite",
    "partitions": "ops.partitions",
    "column_merge": "ops.column_merge",
    # fragments.py was folded into column_merge.py (each imported the other)
    "fragments": "ops.column_merge",
    "ops.fragments": "ops.column_merge",
    "import_files": "ops.import_files",
    "external": "ops.external",
}

#: Files moved with git mv: old path -> new path. fragments.py was moved to ops/ and merged
#: into column_merge.py by hand: a branch that still has it must merge its changes by hand too.
FILE_MOVES: dict[str, str] = {
    f"tablestore/table/{old.replace('.', '/')}.py": f"tablestore/table/{new.replace('.', '/')}.py"
    for old, new in MODULE_MOVES.items()
    if "fragments" not in old
}

#: The modules of the packages that replace the modules of the same name.
PACKAGE_MODULES = {
    "read": ("data_files", "scan", "inspect", "file_rows", "deletion_vectors"),
    "write": ("data_files", "writers", "conform", "metrics"),
}

PACKAGE_DOCS = {
    "read": '"""Reading a table: scan planning, reading data and delete files, metadata tables.\n\n'
            "- :mod:`.scan`: TableScan and plan_files (manifests pruned to file tasks);\n"
            "- :mod:`.data_files`: one file task read into Arrow (projection by field id, deletes);\n"
            "- :mod:`.deletion_vectors`: Puffin deletion vectors (format v3);\n"
            "- :mod:`.file_rows`: the live rows of one data file, for rewrites;\n"
            "- :mod:`.inspect`: metadata tables (snapshots, files, partitions, ...).\n"
            '"""\n',
    "write": '"""Writing data files: partitioned writers, conforming input, column metrics.\n\n'
             "- :mod:`.data_files`: WriteContext, splitting by partition, one partition's files;\n"
             "- :mod:`.writers`: streaming writers (single partition, clustered, fanout);\n"
             "- :mod:`.conform`: input of any supported kind to the table's Arrow schema;\n"
             "- :mod:`.metrics`: column metrics of written Parquet files.\n"
             '"""\n',
    "ops": '"""Operations on a table\'s rows, above the commit path (:mod:`tablestore.table.update`).\n\n'
           "Each plans its files, writes through :mod:`tablestore.table.write` and commits a\n"
           "snapshot producer through a Transaction:\n\n"
           "- :mod:`.data`: append, overwrite, replace partitions and delete, for Table and Transaction;\n"
           "- :mod:`.row_level`, :mod:`.row_expressions`, :mod:`.position_deletes`: DELETE and UPDATE;\n"
           "- :mod:`.merge`: MERGE INTO; :mod:`.overwrite`: overwrite by filter, dynamic partitions;\n"
           "- :mod:`.partitions`: partition-level rewrites; :mod:`.column_merge`: column merges by fragment;\n"
           "- :mod:`.import_files`, :mod:`.external`: registering files written elsewhere.\n"
           '"""\n',
}

TEXT_SUFFIXES = (".py", ".toml", ".md", ".cfg")
SELF = "tools/restructure_table.py"
#: Files whose mentions of the old modules are not references: test_layers.py builds a throwaway
#: package with modules named table/write.py and table/writers.py to test the private-name check.
UNTOUCHED = (SELF, "tests/test_layers.py")


def module_pattern(old: str) -> re.Pattern[str]:
    """Where ``tablestore.table.<old>`` names the old module.

    For ``read`` and ``write``, now packages, only the unambiguous references: an import of it
    (``from tablestore.table.read import x``, ``import tablestore.table.read``), a quoted module
    name, or a path to a name inside it that is not one of the package's modules
    (``tablestore.table.read.read_task_table``). A mention in prose may mean the package.
    """
    name = re.escape(f"{PACKAGE}.{old}")
    if old in PACKAGE_MODULES:
        keep = "|".join(PACKAGE_MODULES[old])
        return re.compile(
            rf"(?<=from ){name}(?= import\b)"
            rf"|(?<=import ){name}(?![\w.])"
            rf"|(?<=[\"']){name}(?=[\"'])"
            rf"|(?<![\w.]){name}(?=\.(?!(?:{keep})\b)\w)"
        )
    return re.compile(rf"(?<![\w.]){name}(?!\w)")


def path_pattern(old: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w/])((?:tablestore/)?)table/{re.escape(old.replace('.', '/'))}\.py\b")


def rewrite(text: str) -> str:
    # Longest names first, so ``ops.fragments`` is rewritten before a shorter name could match.
    for old in sorted(MODULE_MOVES, key=len, reverse=True):
        new = MODULE_MOVES[old]
        text = module_pattern(old).sub(f"{PACKAGE}.{new}", text)
        new_path = f"table/{new.replace('.', '/')}.py"
        text = path_pattern(old).sub(rf"\g<1>{new_path}", text)
    return text


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def main() -> int:
    root = Path(git("rev-parse", "--show-toplevel").strip())
    os_root = str(root)
    for package, doc in PACKAGE_DOCS.items():
        init = root / "tablestore/table" / package / "__init__.py"
        if not init.exists():
            init.parent.mkdir(parents=True, exist_ok=True)
            init.write_text(doc)
            git("-C", os_root, "add", str(init.relative_to(root)))
    for merged in ("tablestore/table/fragments.py", "tablestore/table/ops/fragments.py"):
        if (root / merged).exists():
            print(f"{merged} exists: merge its changes into tablestore/table/ops/column_merge.py",
                  file=sys.stderr)
    for old, new in FILE_MOVES.items():
        if (root / old).exists():
            if (root / new).exists():
                print(f"both {old} and {new} exist: merge them by hand", file=sys.stderr)
                continue
            git("-C", os_root, "mv", old, new)
            print(f"moved {old} -> {new}")
    changed: list[str] = []
    for name in git("-C", os_root, "ls-files").splitlines():
        if not name.endswith(TEXT_SUFFIXES) or name in UNTOUCHED:
            continue
        path = root / name
        if not path.exists():
            continue
        text = path.read_text()
        new_text = rewrite(text)
        if new_text != text:
            path.write_text(new_text)
            changed.append(name)
    print(f"rewrote references in {len(changed)} files")
    python = [name for name in changed if name.endswith(".py")]
    if python:
        # A renamed module can change the order of an import block.
        sort = [sys.executable, "-m", "ruff", "check", "--quiet", "--select", "I", "--fix", *python]
        if subprocess.run(sort, cwd=os_root).returncode not in (0, 1):
            print("run `ruff check --select I --fix` on the rewritten files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
