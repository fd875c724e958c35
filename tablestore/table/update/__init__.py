"""The commit path: every change to a table becomes requirements and updates, committed once.

It sits below the operations (:mod:`tablestore.table.ops`), which build its snapshot producers
from rows, and above reading and writing files (:mod:`tablestore.table.read`,
:mod:`tablestore.table.write`).

- :mod:`.transaction`: :class:`Transaction`, which holds a table's pending changes and commits
  them in one metadata commit (``table.transaction()``; every single operation is a
  transaction of one change);
- :mod:`.retry`: the one retry loop and its ``commit.retry.*`` policy;
- :mod:`.validation`: conflict checks against concurrent commits, and isolation levels;
- :mod:`.identity`: commit identifiers, so a retried job never applies twice;
- builders of metadata changes: :mod:`.schema` (UpdateSchema, with :mod:`.schema_rewrite` for
  type changes that rewrite files), :mod:`.spec` (UpdateSpec); properties are
  :class:`~.transaction.PropertiesChange`, raw updates :class:`~.transaction.FixedChange` and
  updates recomputed on every attempt (expiry, dropped refs) :class:`~.transaction.ComputedChange`;
- snapshot producers: :mod:`.snapshot` (append, overwrite, delete, row delta),
  :mod:`.rewrite` (rewrite files and manifests), :mod:`.column_fragments` (column merges),
  :mod:`.register` (imported files).
"""
