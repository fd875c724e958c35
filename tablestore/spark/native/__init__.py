"""The native Parquet paths of the Spark engine: Spark's own Parquet reader and writer, planned
and committed by tablestore, and plain scans of local Parquet files read by tasks with pyarrow.
"""
