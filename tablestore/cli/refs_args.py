"""Arguments of the branch and tag commands (kept light: parsing must not import the engine)."""

from __future__ import annotations

import argparse

REF_ACTIONS = ("refs", "branch", "tag", "rollback", "fast-forward")


def add_ref_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ref", nargs="?", help="branch/tag: the branch or tag; fast-forward: the branch to move")
    parser.add_argument("--snapshot-id", type=int,
                        help="branch/tag: the snapshot (default main's current); rollback: the snapshot to roll "
                             "back to")
    parser.add_argument("--replace", action="store_true", help="branch/tag: move an existing one (create it if "
                                                                "missing, as CREATE OR REPLACE)")
    parser.add_argument("--drop", action="store_true", help="branch/tag: remove it")
    parser.add_argument("--max-ref-age-ms", type=int, help="branch/tag: how long the ref is kept")
    parser.add_argument("--min-snapshots-to-keep", type=int, help="branch: snapshots its expiry keeps")
    parser.add_argument("--max-snapshot-age-ms", type=int, help="branch: age of the snapshots its expiry keeps")
    parser.add_argument("--timestamp", help="rollback: roll back to the newest snapshot older than this ISO time")
    parser.add_argument("--branch", default="main", help="rollback: the branch to roll back (default main)")
    parser.add_argument("--to", help="fast-forward: the branch or tag whose head the branch moves to")
