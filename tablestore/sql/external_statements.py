"""Execution of external Hive-style tables (issue 5): CREATE EXTERNAL TABLE, MSCK REPAIR, ADD PARTITION ... LOCATION.

A mixin of :class:`tablestore.sql.session.SqlSession`: a statement class ``X`` runs in method ``_X``.
"""

from __future__ import annotations


class ExternalTableStatements:
    pass
