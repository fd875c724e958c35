"""The interactive SQL shell: history, tab completion of keywords and names, multi-line input.

A statement runs when its text ends with ``;`` (it may span lines); ``exit``, ``quit``, ``\\q``
or Ctrl-D leave, Ctrl-C drops the statement being typed. History is kept in
``$TABLESTORE_HISTORY`` (default ``~/.tablestore_history``). An error is printed and the shell
goes on.
"""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tablestore.cli.output import print_result
from tablestore.errors import ParseError, TableStoreError
from tablestore.sql.parse.parser import parse_script
from tablestore.sql.session import SqlSession

if TYPE_CHECKING:
    from prompt_toolkit.completion import CompleteEvent, Completion
    from prompt_toolkit.document import Document

KEYWORDS = [
    "SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "LIMIT", "JOIN", "ON", "AS", "AND", "OR", "NOT",
    "INSERT INTO", "INSERT OVERWRITE", "VALUES", "PARTITION", "CREATE TABLE", "CREATE DATABASE", "CREATE VIEW",
    "CREATE FUNCTION", "DROP TABLE", "DROP DATABASE", "DROP VIEW", "DROP FUNCTION", "ALTER TABLE",
    "RENAME TO", "SET TBLPROPERTIES", "UNSET TBLPROPERTIES", "SHOW CATALOGS", "SHOW DATABASES", "SHOW TABLES",
    "SHOW VIEWS", "SHOW FUNCTIONS", "SHOW CREATE TABLE", "DESCRIBE", "USE", "PARTITIONED BY", "TBLPROPERTIES",
    "VERSION AS OF", "TIMESTAMP AS OF", "IF NOT EXISTS", "IF EXISTS", "CASCADE", "PURGE",
]
# Every single word of the phrases too: the completer sees one word at a time.
WORDS = sorted({w for phrase in KEYWORDS for w in phrase.split()})
_WORD_BEFORE_CURSOR = re.compile(r"[\w.`]*$")


def history_path() -> Path:
    return Path(os.environ.get("TABLESTORE_HISTORY") or Path.home() / ".tablestore_history")


def names(session: SqlSession) -> list[str]:
    """Catalogs, databases, and tables and views (bare and qualified) of the current catalog."""
    out = list(session.manager.catalog_names())
    try:
        catalog = session.manager.catalog()
        current = tuple(session.manager.current_namespace)
        for ns in catalog.list_namespaces():
            out.append(".".join(ns))
            for ident in [*catalog.list_tables(ns), *catalog.list_views(ns)]:
                out.append(".".join(ident))
                if tuple(ident[:-1]) == current:
                    out.append(ident[-1])
    except TableStoreError:
        pass  # an unreachable catalog leaves only keywords to complete
    return out


class SqlCompleter:
    """Completes the word before the cursor with keywords and the names of the catalog."""

    def __init__(self, session: SqlSession) -> None:
        self.session = session

    def candidates(self, word: str) -> list[str]:
        prefix = word.lower()
        found = [w for w in WORDS if w.lower().startswith(prefix)]
        found += [n for n in dict.fromkeys(names(self.session)) if n.lower().startswith(prefix)]
        return found

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        from prompt_toolkit.completion import Completion

        match = _WORD_BEFORE_CURSOR.search(document.text_before_cursor)
        word = match.group(0) if match else ""
        if not word:
            return
        for candidate in self.candidates(word):
            yield Completion(candidate, start_position=-len(word))


def run_shell(session: SqlSession, fmt: str) -> int:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.completion import Completer
    from prompt_toolkit.history import FileHistory

    class _Completer(SqlCompleter, Completer):
        pass

    prompt: PromptSession[str] = PromptSession(history=FileHistory(str(history_path())),
                                               completer=_Completer(session), complete_while_typing=False)
    buffer: list[str] = []
    while True:
        label = f"{session.manager.current_catalog}.{session.manager.current_database}"
        try:
            line = prompt.prompt(f"{label}> " if not buffer else "... ")
        except EOFError:
            return 0
        except KeyboardInterrupt:
            buffer = []
            continue
        if not buffer and line.strip().lower() in ("exit", "quit", r"\q"):
            return 0
        buffer.append(line)
        text = "\n".join(buffer).strip()
        if not text:
            buffer = []
            continue
        if not text.endswith(";"):
            continue  # statements end with ';'
        buffer = []
        run_statements(session, text, fmt)


def run_statements(session: SqlSession, text: str, fmt: str) -> None:
    """Run and print; any error is printed and the shell stays."""
    try:
        # One statement at a time: a query's rows are printed as they come, before the next runs.
        for statement in parse_script(text):
            print_result(session.execute_statement(statement), fmt)
    except ParseError as e:
        print(f"error: {e}")
        if e.highlight:
            print(e.highlight)
    except TableStoreError as e:
        print(f"error: {e}")
    except Exception as e:  # a bug should not end the user's session and lose their context
        print(f"internal error: {type(e).__name__}: {e}")
        if os.environ.get("TABLESTORE_DEBUG"):
            traceback.print_exc()
