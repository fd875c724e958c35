"""The data source `tablestore` of the Spark engine: Spark reads and writes tables through it,
in Arrow batches, in batch and as a streaming sink (`source.py` is the class Spark registers).
"""
