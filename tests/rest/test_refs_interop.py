"""Branches and tags through the catalog service, between clients: what tablestore makes,
pyiceberg reads by ref name; what pyiceberg makes (``manage_snapshots``, ``append(branch=)``),
tablestore reads; the service applies ``set-snapshot-ref`` and ``remove-snapshot-ref`` and
refuses a commit whose ``assert-ref-snapshot-id`` no longer holds."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from tablestore.errors import CommitConflictError
from tablestore.spec.metadata.update_models import AssertRefSnapshotId, SetSnapshotRefUpdate
from tests.services import RestService

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def batch(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


def test_pyiceberg_reads_our_refs_and_we_read_pyicebergs(rest_service: RestService) -> None:
    ns = f"refs_{uuid.uuid4().hex[:8]}"
    ours = rest_service.client()
    ours.create_namespace(ns)
    table = ours.create_table(f"{ns}.t", SCHEMA)
    first = table.append(batch(1, 2))
    table.manage_snapshots().create_tag(first.snapshot_id, "v1").commit()
    table.append(batch(3), branch="audit")
    table.append(batch(4))

    py = rest_service.pyiceberg().load_table(f"{ns}.t")
    assert sorted(py.scan().to_arrow()["id"].to_pylist()) == [1, 2, 4]
    assert sorted(py.scan().use_ref("audit").to_arrow()["id"].to_pylist()) == [1, 2, 3]
    assert sorted(py.scan().use_ref("v1").to_arrow()["id"].to_pylist()) == [1, 2]
    assert {name: ref.snapshot_ref_type.value for name, ref in py.metadata.refs.items()} == {
        "main": "branch", "audit": "branch", "v1": "tag"}

    # pyiceberg makes a branch and writes to it; tablestore reads it and publishes it.
    head = py.metadata.current_snapshot_id
    py.manage_snapshots().create_branch(head, "py").commit()
    py = rest_service.pyiceberg().load_table(f"{ns}.t")
    py.append(batch(5), branch="py")
    table.refresh()
    assert sorted(table.scan(ref="py").to_arrow()["id"].to_pylist()) == [1, 2, 4, 5]
    table.manage_snapshots().fast_forward("main", "py").remove_tag("v1").commit()
    py = rest_service.pyiceberg().load_table(f"{ns}.t")
    assert sorted(py.scan().to_arrow()["id"].to_pylist()) == [1, 2, 4, 5]
    assert sorted(py.metadata.refs) == ["audit", "main", "py"]


def test_the_service_refuses_a_ref_update_whose_assertion_no_longer_holds(rest_service: RestService) -> None:
    ns = f"refs_{uuid.uuid4().hex[:8]}"
    ours = rest_service.client()
    ours.create_namespace(ns)
    table = ours.create_table(f"{ns}.t", SCHEMA)
    first = table.append(batch(1))
    second = table.append(batch(2))
    table.manage_snapshots().create_branch(first.snapshot_id, "audit").commit()
    with pytest.raises(CommitConflictError):
        ours.commit_table(f"{ns}.t", [AssertRefSnapshotId(ref="audit", snapshot_id=second.snapshot_id)],
                          [SetSnapshotRefUpdate(ref_name="audit", snapshot_id=second.snapshot_id, type="branch")])
    assert table.refresh().refs()["audit"].snapshot_id == first.snapshot_id
    with pytest.raises(CommitConflictError):  # the ref must not exist yet
        ours.commit_table(f"{ns}.t", [AssertRefSnapshotId(ref="audit", snapshot_id=None)],
                          [SetSnapshotRefUpdate(ref_name="audit", snapshot_id=second.snapshot_id, type="branch")])
    ours.commit_table(f"{ns}.t", [AssertRefSnapshotId(ref="audit", snapshot_id=first.snapshot_id)],
                      [SetSnapshotRefUpdate(ref_name="audit", snapshot_id=second.snapshot_id, type="branch")])
    assert table.refresh().refs()["audit"].snapshot_id == second.snapshot_id
