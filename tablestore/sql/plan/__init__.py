"""Query planning: a query's table names resolved through the catalog manager to temporary views
over the ``tablestore`` data source (``planner.py``), branch and tag names (``ref_names.py``) and
the hidden row lineage columns (``lineage_columns.py``), run by Spark SQL.
"""
