"""Execution of schema evolution (issue 4): ALTER TABLE ... ADD/DROP/RENAME/ALTER COLUMN, identifier fields.

A mixin of :class:`tablestore.sql.session.SqlSession`: a statement class ``X`` runs in method ``_X``.
"""

from __future__ import annotations


class SchemaStatements:
    pass
