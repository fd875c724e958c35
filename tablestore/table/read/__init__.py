"""Reading a table: scan planning, reading data and delete files, metadata tables.

- :mod:`.scan`: TableScan and plan_files (manifests pruned to file tasks);
- :mod:`.data_files`: one file task read into Arrow (projection by field id, deletes);
- :mod:`.deletion_vectors`: Puffin deletion vectors (format v3);
- :mod:`.file_rows`: the live rows of one data file, for rewrites;
- :mod:`.inspect`: metadata tables (snapshots, files, partitions, ...).
"""
