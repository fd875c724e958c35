"""The service's changelog plan (``POST …/plan-changelog``, a tablestore extension): a client
with pyarrow alone computes the changes from it, the same rows as ``table.changes``."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import requests

from tests.services import CATALOG, READ_TOKEN, RestService

READER = {"Authorization": f"Bearer {READ_TOKEN}"}


@pytest.fixture(scope="module")
def service(catalog_service: RestService) -> RestService:
    """The session's catalog service (the default configuration), emptied after the module."""
    return catalog_service


def _local(path: str) -> str:
    return path.removeprefix("file://")


def _client_changes(plan: dict[str, Any]) -> Counter[tuple[Any, ...]]:
    """The changes computed from the plan with pyarrow only: (id, cat, v, change type, ordinal)."""
    deletes = plan["delete-files"]
    out: Counter[tuple[Any, ...]] = Counter()
    for task in plan["change-tasks"]:
        path = task["data-file"]["file-path"]
        rows = pq.read_table(_local(path), columns=["id", "cat", "v"])

        def live(refs: list[int] | None, n: int = rows.num_rows, path: str = path) -> np.ndarray:
            keep = np.ones(n, dtype=bool) if refs is not None else np.zeros(n, dtype=bool)
            for ref in refs or []:
                assert deletes[ref]["content"] == "position-deletes" and deletes[ref]["file-format"] == "parquet"
                positions = pq.read_table(_local(deletes[ref]["file-path"]), columns=["file_path", "pos"])
                keep[positions.filter(pc.equal(positions["file_path"], path))["pos"].to_numpy()] = False
            return keep

        before = live(task.get("before-delete-file-references"))
        after = live(task.get("after-delete-file-references"))
        for kind, mask in (("DELETE", before & ~after), ("INSERT", after & ~before)):
            for r in rows.filter(pa.array(mask)).to_pylist():
                out[(r["id"], r["cat"], r["v"], kind, task["ordinal"])] += 1
    # Carry-overs: a row deleted and inserted unchanged by one snapshot is no change.
    for (i, c, v, kind, ordinal), n in list(out.items()):
        if kind == "DELETE":
            twin = (i, c, v, "INSERT", ordinal)
            cancel = min(n, out.get(twin, 0))
            out[(i, c, v, kind, ordinal)] -= cancel
            out[twin] -= cancel
    return +out


def test_a_client_computes_the_changes_from_the_served_plan(service: RestService) -> None:
    client = service.client()
    try:
        client.create_namespace("db")
        table = client.create_table("db.t", pa.schema([("id", pa.int64()), ("cat", pa.string()), ("v", pa.string())]),
                                    partition_by=["cat"], properties={"write.delete.mode": "merge-on-read",
                                                                      "write.update.mode": "merge-on-read"})
        table.append(pa.table({"id": list(range(8)), "cat": ["a", "b"] * 4, "v": ["x"] * 8}))
        start = table.current_snapshot().snapshot_id
        table.delete("id in (1, 2)")
        table.update({"v": "'y'"}, "id = 3")
        table.update_properties({"write.update.mode": "copy-on-write"})
        table.update({"v": "'z'"}, "id = 4")  # copy-on-write: the file's other rows carry over
        table.append(pa.table({"id": [9], "cat": ["a"], "v": ["n"]}))
        end = table.refresh().current_snapshot().snapshot_id
        ours = table.changes(from_snapshot=start, compute_updates=False).to_arrow()
    finally:
        client.close()
    url = f"{service.uri}/v1/{CATALOG}/namespaces/db/tables/t/plan-changelog"
    response = requests.post(url, json={"start-snapshot-id": start}, headers=READER, timeout=30)
    assert response.status_code == 200, response.text
    plan = response.json()
    assert (plan["status"], plan["start-snapshot-id"], plan["end-snapshot-id"]) == ("completed", start, end)
    assert [s["ordinal"] for s in plan["snapshots"]] == [0, 1, 2, 3]
    assert len(plan["delete-file-sequence-numbers"]) == len(plan["delete-files"]) > 0
    assert all(isinstance(n, int) and n > 0 for n in plan["delete-file-sequence-numbers"])
    expected = Counter((r["id"], r["cat"], r["v"], r["_change_type"], r["_change_ordinal"]) for r in ours.to_pylist())
    assert _client_changes(plan) == expected
    assert sorted(k[:4] for k in expected) == [(1, "b", "x", "DELETE"), (2, "a", "x", "DELETE"), (3, "b", "x", "DELETE"),
                                               (3, "b", "y", "INSERT"), (4, "a", "x", "DELETE"), (4, "a", "z", "INSERT"),
                                               (9, "a", "n", "INSERT")]
    bad = requests.post(url, json={"start-snapshot-id": end, "end-snapshot-id": start}, headers=READER, timeout=30)
    assert bad.status_code == 400 and "not an ancestor" in bad.json()["error"]["message"]
