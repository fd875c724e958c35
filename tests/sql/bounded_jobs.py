"""The three bounded-memory jobs in one process, under one capped Spark driver.

    python -m tests.sql.bounded_jobs ROOT SIZES_JSON

Driver memory is fixed when the JVM starts, so a capped driver needs a process of its own; the
three jobs (an INSERT ... SELECT, a MERGE of many keys, a column merge) share one, started once
with ``CAPPED_DRIVER`` (1 GB of heap, 64 MB of task results), instead of a JVM each. Each job
has a catalog and a warehouse of its own under ROOT. The INSERT runs first: it reads this
process's memory high-water mark, which the later jobs would raise (they sample their own peak).
Prints one JSON line: {"insert": ..., "merge": ..., "column_merge": ...}, each the job's own line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.sql import bounded_column_merge_job, bounded_insert, bounded_merge_job
from tests.sql.bounded_merge_job import CAPPED_DRIVER


def main(root: Path, sizes: dict[str, dict[str, int]]) -> dict[str, object]:
    for name in ("insert", "merge", "column_merge"):
        (root / name).mkdir(parents=True, exist_ok=True)
    insert = bounded_insert.run(sizes["insert"]["rows"], {"spark.ui.enabled": "false", **CAPPED_DRIVER}, root / "insert")
    merge = bounded_merge_job.main(root / "merge", sizes["merge"]["rows"], sizes["merge"]["keys"],
                                   sizes["merge"]["pad"], stop=False)
    column_merge = bounded_column_merge_job.main(root / "column_merge", sizes["column_merge"]["rows"],
                                                 sizes["column_merge"]["pad"])
    return {"insert": insert, "merge": merge, "column_merge": column_merge}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), json.loads(sys.argv[2]))))
