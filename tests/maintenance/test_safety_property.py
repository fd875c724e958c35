"""Property: interleaved writes, deletes, compactions, expirations and orphan removals never
delete a file a retained snapshot references, and reads always equal a model of the rows."""

from __future__ import annotations

import tempfile
import time

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tablestore
from tablestore.maintenance.orphans import referenced_files
from tablestore.maintenance.reachable import normalize_path

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string())])

operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.integers(0, 60), min_size=1, max_size=6)),
        st.tuples(st.just("delete"), st.integers(0, 60)),
        st.tuples(st.just("compact"), st.integers(1, 3)),
        st.tuples(st.just("expire"), st.integers(1, 3)),
        st.tuples(st.just("orphans"), st.just(0)),
        st.tuples(st.just("manifests"), st.just(0)),
    ),
    min_size=3, max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_no_referenced_file_is_ever_deleted_and_reads_match_the_model(ops: list[tuple[str, int]]) -> None:
    root = tempfile.mkdtemp()
    catalog = tablestore.load_catalog("p", type="sql", uri=f"sqlite:///{root}/c.db", warehouse=f"{root}/w")
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", schema=SCHEMA, partition_by=["part"])
    model: list[int] = []
    m = table.maintenance()
    for op, arg in ops:
        if op == "append":
            ids = list(arg)  # type: ignore[call-overload]
            table.append(pa.table({"id": ids, "part": [str(i % 3) for i in ids]}, schema=SCHEMA))
            model.extend(ids)
        elif op == "delete":
            table.delete(f"id = {arg}")
            model = [i for i in model if i != arg]
        elif op == "compact":
            m.rewrite_data_files(options={"min-input-files": arg})
        elif op == "expire":
            m.expire_snapshots(older_than=int(time.time() * 1000) + 1, retain_last=arg)
        elif op == "orphans":
            m.remove_orphan_files(older_than=int(time.time() * 1000) + 1)
        else:
            m.rewrite_manifests()
        table.refresh()
        live = referenced_files(table, include_deleted_entries=False)
        on_disk = {normalize_path(f.path) for f in table.io.list_prefix(table.location)}
        missing = {p for p in live - on_disk if not p.endswith("version-hint.text")}
        assert not missing, f"{op} deleted referenced files: {sorted(missing)[:3]}"
        assert sorted(table.scan().to_arrow().column("id").to_pylist()) == sorted(model)
        # Every retained snapshot is still fully readable.
        for snapshot in table.snapshots():
            table.scan(snapshot_id=snapshot.snapshot_id).count()
