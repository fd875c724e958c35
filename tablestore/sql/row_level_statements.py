"""Execution of row-level DML (issue 6): DELETE, UPDATE and MERGE.

A mixin of :class:`tablestore.sql.session.SqlSession`: a statement class ``X`` runs in method ``_X``.
"""

from __future__ import annotations


class RowLevelStatements:
    pass
