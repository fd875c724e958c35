"""Memory of a changelog as large as the table: the changes of the events table's first snapshot
(``--rows`` INSERTs) read batch by batch, against a plain scan of the same snapshot read batch by
batch (the floor) and the same changelog collected whole (``to_arrow``).

The figure to read is the peak RSS growth: ``to_batches`` holds a data file's rows at a time
(the snapshot only adds files, so there is nothing to cancel or pair), as the scan does.
"""

from __future__ import annotations

from bench.common import Benchmark, Case, Contestant, Workspace, shared_table


def build(ws: Workspace, rounds: int | None = None) -> Benchmark:
    table = shared_table(ws)
    first = table.metadata.snapshots[0].snapshot_id

    def scan() -> int:
        return sum(b.num_rows for b in table.scan(snapshot_id=first).to_batches())

    def changes() -> int:
        return sum(b.num_rows for b in table.changes(to_snapshot=first).to_batches())

    def collected() -> int:
        return int(table.changes(to_snapshot=first).to_arrow().num_rows)

    case = Case("first snapshot", [
        Contestant("scan-batches", scan, floor=True),
        Contestant("tablestore", changes),
        Contestant("tablestore-to-arrow", collected),
    ], rounds=rounds or 3)
    return Benchmark(
        "changelog_stream",
        f"changelog_stream: the changelog of a {ws.rows:,}-row first snapshot, streamed and collected, "
        "against a streamed scan",
        [case],
        notes=["scan-batches: table.scan(snapshot_id=first).to_batches(), rows counted",
               "tablestore: table.changes(to_snapshot=first).to_batches(), rows counted; "
               "tablestore-to-arrow: the same collected with to_arrow()"],
    )
