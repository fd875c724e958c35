"""The commit path: every change to a table becomes requirements and updates, committed once.

- :mod:`.transaction`: :class:`Transaction`, which holds a table's pending changes and commits
  them in one metadata commit (``table.transaction()``; every single operation is a
  transaction of one change);
- :mod:`.retry`: the one retry loop and its ``commit.retry.*`` policy;
- :mod:`.validation`: conflict checks against concurrent commits, and isolation levels;
- :mod:`.identity`: commit identifiers, so a retried job never applies twice;
- builders of metadata changes: :mod:`.schema` (UpdateSchema), :mod:`.spec` (UpdateSpec);
  properties are :class:`~.transaction.PropertiesChange`;
- snapshot producers: :mod:`.snapshot` (append, overwrite, delete, row delta),
  :mod:`.rewrite` (rewrite files and manifests), :mod:`.column_fragments` (column merges),
  :mod:`.register` (imported files).
"""
