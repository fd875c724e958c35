"""Writing data files: partitioned writers, conforming input, column metrics.

- :mod:`.data_files`: WriteContext, splitting by partition, one partition's files;
- :mod:`.writers`: streaming writers (single partition, clustered, fanout);
- :mod:`.conform`: input of any supported kind to the table's Arrow schema;
- :mod:`.metrics`: column metrics of written Parquet files.
"""
