"""`tablestore sql`: run statements from -e or -f, or an interactive shell."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tablestore.cli.output import print_result
from tablestore.cli.shell import run_shell
from tablestore.config import load_config
from tablestore.errors import ValidationError
from tablestore.sql.parse.parser import parse_script
from tablestore.sql.session import SqlSession


def run_sql(args: argparse.Namespace) -> int:
    session = SqlSession(load_config(args.config))
    if args.statements is None and args.file is None:
        return run_shell(session, args.format)
    if args.file is not None:
        path = Path(args.file)
        if not path.is_file():
            raise ValidationError(f"no SQL file at {args.file}")
        script = path.read_text()
    else:
        script = args.statements
    statements = parse_script(script)  # a syntax error anywhere runs nothing
    for statement in statements:
        print_result(session.execute_statement(statement), args.format)
    sys.stdout.flush()
    return 0
