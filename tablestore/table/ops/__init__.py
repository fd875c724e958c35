"""Operations on a table's rows, above the commit path (:mod:`tablestore.table.update`).

Each plans its files, writes through :mod:`tablestore.table.write` and commits a
snapshot producer through a Transaction:

- :mod:`.data`: append, overwrite, replace partitions and delete, for Table and Transaction;
- :mod:`.row_level`, :mod:`.row_expressions`, :mod:`.position_deletes`: DELETE and UPDATE;
- :mod:`.merge`: MERGE INTO; :mod:`.overwrite`: overwrite by filter, dynamic partitions;
- :mod:`.partitions`: partition-level rewrites; :mod:`.column_merge`: column merges by fragment;
- :mod:`.import_files`, :mod:`.external`: registering files written elsewhere.
"""
