"""Cherry-pick: apply one snapshot's changes to a branch, as Java's ``CherryPickOperation`` does.

What can be picked is what Iceberg allows: an ``append`` (its data files are added again), or
an ``overwrite`` made by a dynamic partition overwrite (``replace-partitions=true``; the
partitions it wrote are replaced on the branch). A staged write-audit-publish snapshot
(``wap.id``) is either. When the picked snapshot's parent is the branch's head, the branch is
simply fast-forwarded to it; otherwise a new snapshot carries the same files, with
``source-snapshot-id`` (and ``published-wap-id`` for a staged one) in its summary.

Refused, with nothing committed: a snapshot that is an ancestor of the branch already, one
already picked into it, a wap.id already published, and any other operation (deletes and row
deltas depend on the rows of their own parent).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tablestore.errors import CommitConflictError, NoSuchSnapshotError, ValidationError
from tablestore.spec.manifests.manifest import DataFileContent, ManifestEntryStatus, read_manifest, snapshot_manifests
from tablestore.spec.metadata.table_metadata import (
    PUBLISHED_WAP_ID_PROPERTY,
    SOURCE_SNAPSHOT_ID_PROPERTY,
    WAP_ID_PROPERTY,
    Snapshot,
    SnapshotRef,
    TableMetadata,
)
from tablestore.spec.metadata.update_models import (
    AssertRefSnapshotId,
    AssertTableUUID,
    SetSnapshotRefUpdate,
)
from tablestore.table.ops.overwrite import replace_partitions_files_producer
from tablestore.table.update.retry import StagedCommit
from tablestore.table.update.snapshot import SnapshotProducer

if TYPE_CHECKING:
    from tablestore.spec.manifests.manifest import DataFile
    from tablestore.table import Table


class CherryPick:
    """The cherry-pick of ``snapshot_id`` onto ``branch`` of ``table``."""

    def __init__(self, table: Table, snapshot_id: int, branch: str) -> None:
        self.table = table.on_branch(branch)
        self.branch = branch
        picked = table.metadata.snapshot_by_id(snapshot_id)
        if picked is None:
            raise NoSuchSnapshotError(
                f"cannot cherry-pick snapshot {snapshot_id}: table {table.name} has no such snapshot"
            )
        self.picked = picked
        self.replaces_partitions = False
        #: Any other operation (a staged delete, say) is picked only as a fast-forward, as in Java.
        self.fast_forward_only = False
        if picked.operation == "overwrite" and picked.summary.get("replace-partitions") == "true":
            self.replaces_partitions = True
        elif picked.operation != "append":
            self.fast_forward_only = True
            if not self.is_fast_forward(table.metadata):
                raise ValidationError(self._not_pickable())
        self.check(table.metadata)

    def check(self, base: TableMetadata) -> None:
        """Refuse a pick that is already part of the branch (Java's ``validateNonAncestor`` and
        ``WapUtil.validateWapPublish``)."""
        what = f"cannot cherry-pick snapshot {self.picked.snapshot_id} onto {self.branch!r}"
        wap_id = self.picked.summary.get(WAP_ID_PROPERTY)
        for ancestor in base.ancestors_of(_head_id(base, self.branch)):
            if ancestor.snapshot_id == self.picked.snapshot_id:
                raise ValidationError(f"{what}: it is already an ancestor of the branch")
            if ancestor.summary.get(SOURCE_SNAPSHOT_ID_PROPERTY) == str(self.picked.snapshot_id):
                raise ValidationError(f"{what}: it was picked already, as snapshot {ancestor.snapshot_id}")
            if wap_id and wap_id in (ancestor.summary.get(WAP_ID_PROPERTY),
                                     ancestor.summary.get(PUBLISHED_WAP_ID_PROPERTY)):
                raise ValidationError(
                    f"{what}: wap.id {wap_id!r} was published already, in snapshot {ancestor.snapshot_id}"
                )

    def is_fast_forward(self, base: TableMetadata) -> bool:
        return self.picked.parent_snapshot_id == _head_id(base, self.branch)

    def stage_fast_forward(self, base: TableMetadata) -> StagedCommit:
        """Move the branch to the picked snapshot, which builds on its head (else a conflict)."""
        if not self.is_fast_forward(base):
            raise CommitConflictError(
                f"cannot fast-forward {self.branch!r} to snapshot {self.picked.snapshot_id}: the branch "
                "moved meanwhile; cherry-pick again"
            )
        self.check(base)
        ref = base.refs.get(self.branch)
        kept = ref or SnapshotRef(self.picked.snapshot_id)
        return StagedCommit(
            [AssertTableUUID(uuid=base.table_uuid),
             AssertRefSnapshotId(ref=self.branch, snapshot_id=ref.snapshot_id if ref else None)],
            [SetSnapshotRefUpdate(ref_name=self.branch, snapshot_id=self.picked.snapshot_id, type="branch",
                                  max_ref_age_ms=kept.max_ref_age_ms, max_snapshot_age_ms=kept.max_snapshot_age_ms,
                                  min_snapshots_to_keep=kept.min_snapshots_to_keep)],
        )

    def _not_pickable(self) -> str:
        return (f"cannot cherry-pick snapshot {self.picked.snapshot_id}: it is a {self.picked.operation!r} "
                f"snapshot whose parent is not the head of {self.branch!r}, and only appends and dynamic "
                "partition overwrites (replace-partitions) can be applied onto another parent")

    def producer(self) -> SnapshotProducer:
        """A new snapshot on the branch with the picked snapshot's added data files."""
        if self.fast_forward_only:
            raise CommitConflictError(self._not_pickable())
        added = self.added_files()
        properties = {SOURCE_SNAPSHOT_ID_PROPERTY: str(self.picked.snapshot_id)}
        wap_id = self.picked.summary.get(WAP_ID_PROPERTY)
        if wap_id:
            properties[PUBLISHED_WAP_ID_PROPERTY] = wap_id
        if self.replaces_partitions:
            producer: SnapshotProducer = replace_partitions_files_producer(self.table, added, properties)
        else:
            producer = SnapshotProducer(self.table, added=added, snapshot_properties=properties,
                                        operation="append")
        # The files belong to the picked snapshot: a failed pick must not delete them.
        producer.owns_added_files = False
        check = self.check
        original = producer.validate

        def validate(base: TableMetadata, parent: Snapshot | None) -> None:
            check(base)
            original(base, parent)

        producer.validate = validate  # type: ignore[method-assign]
        return producer

    def added_files(self) -> list[DataFile]:
        io = self.table.io
        out: list[DataFile] = []
        for manifest in snapshot_manifests(io, self.picked):
            if manifest.added_snapshot_id != self.picked.snapshot_id:
                continue
            for entry in read_manifest(io, manifest, specs=self.table.specs()):
                if (entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id == self.picked.snapshot_id
                        and entry.data_file.content == DataFileContent.DATA):
                    out.append(entry.data_file)
        return out


def _head_id(base: TableMetadata, branch: str) -> int | None:
    head = base.branch_head(branch)
    return head.snapshot_id if head is not None else None
