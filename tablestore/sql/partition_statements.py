"""Execution of partitions (issue 5): partition evolution, SHOW/DROP/RENAME PARTITION, static partition inserts.

A mixin of :class:`tablestore.sql.session.SqlSession`: a statement class ``X`` runs in method ``_X``.
"""

from __future__ import annotations


class PartitionStatements:
    pass
