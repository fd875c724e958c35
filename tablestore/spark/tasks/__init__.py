"""The Spark jobs of SQL writes, row-level statements and column merges: tasks that write files
and return their descriptions, committed once on the driver (`tablestore.spark.commit`).
"""
