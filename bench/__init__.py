"""Side-by-side benchmarks of tablestore against plain pyarrow (the floor) and pyiceberg.

Run them with ``python -m bench.run`` (or ``make bench``); see bench/README.md.
"""
