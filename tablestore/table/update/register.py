"""The snapshot that registers existing files (``import_files``, ``ADD PARTITION ... LOCATION``,
``MSCK REPAIR``): files added as they are, vanished ones removed, data files never deleted."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tablestore.spec.manifests.manifest import DataFile
from tablestore.table.update.snapshot import SnapshotProducer, since
from tablestore.table.update.validation import Validation, no_new_data_files

if TYPE_CHECKING:
    from tablestore.table import Table


class RegisterFiles(SnapshotProducer):
    """One commit adding existing files (and removing vanished ones).

    A snapshot producer deletes the files it added when its commit fails; these files are the
    user's, so only the manifests written for the attempt are cleaned up.
    """

    def __init__(
        self,
        table: Table,
        added: Iterable[DataFile],
        removed: Iterable[DataFile] = (),
        snapshot_properties: dict[str, str] | None = None,
    ) -> None:
        added = list(added)
        paths = {f.file_path for f in added}
        check = no_new_data_files(
            lambda f: f.file_path in paths,
            lambda f: f"a concurrent commit registered {f.file_path} already; re-run the operation",
        )
        super().__init__(table, added=added, deleted=removed,
                         validations=[Validation(since(table.current_snapshot()), check)],
                         snapshot_properties=snapshot_properties)

    def cleanup(self, keep_added_files: bool = False) -> None:
        super().cleanup(keep_added_files=True)


