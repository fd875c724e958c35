"""The interactive SQL shell: history, tab completion of keywords and names, multi-line input."""

from __future__ import annotations

from pathlib import Path

from tablestore.cli.output import print_result
from tablestore.errors import ParseError, TableStoreError
from tablestore.sql.session import SqlSession

KEYWORDS = [
    "SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "LIMIT", "JOIN", "ON", "AS", "AND", "OR", "NOT",
    "INSERT INTO", "INSERT OVERWRITE", "VALUES", "PARTITION", "CREATE TABLE", "CREATE DATABASE", "CREATE VIEW",
    "CREATE FUNCTION", "DROP TABLE", "DROP DATABASE", "DROP VIEW", "DROP FUNCTION", "ALTER TABLE",
    "RENAME TO", "SET TBLPROPERTIES", "UNSET TBLPROPERTIES", "SHOW CATALOGS", "SHOW DATABASES", "SHOW TABLES",
    "SHOW VIEWS", "SHOW FUNCTIONS", "SHOW CREATE TABLE", "DESCRIBE", "USE", "PARTITIONED BY", "TBLPROPERTIES",
    "VERSION AS OF", "TIMESTAMP AS OF", "IF NOT EXISTS", "IF EXISTS", "CASCADE", "PURGE",
]


def _names(session: SqlSession) -> list[str]:
    names = list(session.manager.catalog_names())
    try:
        catalog = session.manager.catalog()
        names.extend(".".join(ns) for ns in catalog.list_namespaces())
        db = session.manager.current_namespace
        names.extend(t[-1] for t in catalog.list_tables(db))
        names.extend(v[-1] for v in catalog.list_views(db))
    except TableStoreError:
        pass
    return names


def run_shell(session: SqlSession, fmt: str) -> int:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.completion import WordCompleter
    from prompt_toolkit.history import FileHistory

    history = Path.home() / ".tablestore_history"
    prompt: PromptSession[str] = PromptSession(history=FileHistory(str(history)))
    buffer: list[str] = []
    while True:
        label = f"{session.manager.current_catalog}.{session.manager.current_database}"
        try:
            completer = WordCompleter(KEYWORDS + _names(session), ignore_case=True, sentence=True)
            line = prompt.prompt(f"{label}> " if not buffer else "... ", completer=completer)
        except EOFError:
            return 0
        except KeyboardInterrupt:
            buffer = []
            continue
        if not buffer and line.strip().lower() in ("exit", "quit", r"\q"):
            return 0
        buffer.append(line)
        text = "\n".join(buffer).strip()
        if not text.endswith(";"):
            continue  # statements end with ';'
        buffer = []
        try:
            for result in session.execute(text):
                print_result(result, fmt)
        except ParseError as e:
            print(f"error: {e}")
            if e.highlight:
                print(e.highlight)
        except TableStoreError as e:
            print(f"error: {e}")
