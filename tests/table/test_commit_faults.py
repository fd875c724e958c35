"""The fault matrix of issue 44: a commit whose outcome is unknown never destroys a table.

Every write kind (append, overwrite, delete, update and MERGE in copy-on-write and
merge-on-read, merge_columns, compaction, erasure, a branch write) meets real faults of its
commit on every catalog:

- REST (the catalog service behind :class:`tests.faults.FaultProxy`, a gateway): the answer lost
  after the commit landed (502), a 503 before it landed, the connection reset after the request
  was sent, and the catalog gone after the commit was sent (no reload can tell the outcome);
- SQLite and PostgreSQL (:class:`tests.faults.DatabaseFault` at the swap's COMMIT): the answer
  lost after COMMIT, the connection lost before it; on PostgreSQL the backend killed with
  ``pg_terminate_backend`` at COMMIT;
- SQLite: the writing process SIGKILLed just after the swap (one subprocess forks a child per
  write kind).

HTTP faults apply to REST only and database faults to the SQL catalogs: the REST client never
sees the database, and the SQL catalog has no HTTP hop.

For every case: the table is readable by tablestore and by Java Iceberg (one oracle batch per
test); its rows are exactly the state before or after the write, never a mix; the write reports
which (returns: landed; CommitFailedError: not landed; CommitStateUnknownError naming the
snapshot id: unknown, and the table has the snapshot exactly when it has the after rows); a
retry with the same commit id leaves the after state (applying a write that did not land, and
nothing more for one that did); ``remove_orphan_files`` then removes only unreferenced files.

Each test prints its counts. As built: REST 48 cases (36 landed, 0 not landed, 12 unknown: the
catalog gone after the commit was sent, every one of which had landed and was found by the retry
with its commit id); SQLite 24 and PostgreSQL 24 (all landed: a lost answer is found by the
reload, a COMMIT that failed is sent again); 12 writers SIGKILLed after the swap (all landed, a
retry applies nothing). "Not landed" never ends a write here: a commit known not to have landed
is staged and sent again, so it lands; only a conflict ends one that way (tests/table/
test_commit_retries.py). The Java reference reads every case's table in one query per test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from tablestore.catalog.base import Catalog
from tablestore.errors import CommitFailedError, CommitStateUnknownError
from tablestore.maintenance.orphans import list_table_files, referenced_files, remove_orphan_files
from tablestore.maintenance.reachable import normalize_path
from tablestore.table import Table
from tests import oracle
from tests.faults import DatabaseFault, FaultProxy
from tests.services import WRITE_TOKEN, RestService

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("n", pa.int64())])
Rows = list[tuple[Any, ...]]


def rows_of(data: pa.Table) -> Rows:
    x = data.column("x").to_pylist() if "x" in data.column_names else [None] * data.num_rows
    return sorted(zip(data.column("id").to_pylist(), data.column("n").to_pylist(), x, strict=True))


@dataclass(frozen=True)
class Kind:
    """One write kind: the table's properties, the write (given the catalog, the table, its
    name and a commit id) and the rows it leaves from the rows before."""

    properties: dict[str, str]
    run: Callable[[Catalog, Table, str, str], object]
    after: Callable[[Rows], Rows]
    branch: str | None = None
    #: Whether a retry with the same commit id adds no snapshot (erasure has no commit id:
    #: erasing the same subjects again deletes nothing, but it rewrites manifests).
    idempotent_by_id: bool = True


COW = {"write.delete.mode": "copy-on-write", "write.update.mode": "copy-on-write", "write.merge.mode": "copy-on-write"}
MOR = {"write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read", "write.merge.mode": "merge-on-read"}


def _merge(catalog: Catalog, t: Table, name: str, cid: str) -> object:
    source = pa.table({"id": pa.array([1, 50], pa.int64()), "n": pa.array([10, 5], pa.int64())})
    return t.merge(source, on="t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute(cid)


def _merged(rows: Rows) -> Rows:
    return sorted([(i, 10 if i == 1 else n, x) for i, n, x in rows] + [(50, 5, None)])


KINDS: dict[str, Kind] = {
    "append": Kind({}, lambda c, t, name, cid: t.append(pa.table({"id": [100, 101], "n": [0, 0]}, SCHEMA),
                                                        commit_id=cid),
                   lambda r: sorted([*r, (100, 0, None), (101, 0, None)])),
    "overwrite": Kind({}, lambda c, t, name, cid: t.overwrite(pa.table({"id": [0], "n": [50]}, SCHEMA), "id < 2",
                                                              commit_id=cid),
                      lambda r: sorted([x for x in r if x[0] >= 2] + [(0, 50, None)])),
    "delete-cow": Kind(COW, lambda c, t, name, cid: t.delete("id < 2", commit_id=cid),
                       lambda r: [x for x in r if x[0] >= 2]),
    "delete-mor": Kind(MOR, lambda c, t, name, cid: t.delete("id < 2", commit_id=cid),
                       lambda r: [x for x in r if x[0] >= 2]),
    "update-cow": Kind(COW, lambda c, t, name, cid: t.update({"n": "n + 1"}, "id < 5", commit_id=cid),
                       lambda r: sorted((i, n + 1 if i < 5 else n, x) for i, n, x in r)),
    "update-mor": Kind(MOR, lambda c, t, name, cid: t.update({"n": "n + 1"}, "id < 5", commit_id=cid),
                       lambda r: sorted((i, n + 1 if i < 5 else n, x) for i, n, x in r)),
    "merge-cow": Kind(COW, _merge, _merged),
    "merge-mor": Kind(MOR, _merge, _merged),
    "merge_columns": Kind({}, lambda c, t, name, cid: t.merge_columns(
        pa.table({"id": pa.array([0, 1], pa.int64()), "x": pa.array([7, 8], pa.int64())}), on="id", commit_id=cid),
        lambda r: sorted((i, n, {0: 7, 1: 8}.get(i)) for i, n, _ in r)),
    "compaction": Kind({}, lambda c, t, name, cid: t.maintenance().rewrite_data_files(
        options={"min-input-files": 2}, commit_id=cid), lambda r: r),
    "erasure": Kind({}, lambda c, t, name, cid: tablestore.erase(
        c, name, "id", request_id=cid, values=[1, 2], audit_table=f"{name}_audit"),
        lambda r: [x for x in r if x[0] not in (1, 2)], idempotent_by_id=False),
    "branch": Kind({}, lambda c, t, name, cid: t.append(pa.table({"id": [200], "n": [1]}, SCHEMA), commit_id=cid,
                                                        branch="audit"),
                   lambda r: sorted([*r, (200, 1, None)]), branch="audit"),
}


def setup_table(catalog: Catalog, name: str, kind: Kind) -> Table:
    table = catalog.create_table(name, schema=SCHEMA, properties=kind.properties)
    for start in (0, 3, 6):  # three files: compaction has something to do
        table.append(pa.table({"id": list(range(start, start + 3)), "n": [start] * 3}, SCHEMA))
    return table


def read(catalog: Catalog, name: str, kind: Kind) -> tuple[Table, Rows]:
    table = catalog.load_table(name)
    if kind.branch is not None and kind.branch in table.metadata.refs:
        table = table.on_branch(kind.branch)
    return table, rows_of(table.scan().to_arrow())


@dataclass
class Case:
    catalog_kind: str
    kind_name: str
    fault: str
    outcome: str = ""
    snapshot_id: int | None = None

    @property
    def name(self) -> str:
        return f"db.{self.kind_name.replace('-', '_')}_{self.fault}"

    @property
    def commit_id(self) -> str:
        return f"{self.catalog_kind}-{self.kind_name}-{self.fault}"


class Matrix:
    """Runs cases on one catalog: ``faulty`` is where the write goes through the fault, ``clean``
    the same catalog without it (the later checks)."""

    def __init__(self, clean: Catalog, faulty: Catalog, arm: Callable[[str | None], None]) -> None:
        self.clean, self.faulty, self.arm = clean, faulty, arm
        self.cases: list[Case] = []
        self.oracle_reads: list[tuple[Case, str, str | None, Rows]] = []
        self.seconds: dict[str, float] = {}

    def run(self, case: Case) -> None:
        started = time.perf_counter()
        try:
            self.run_case(case)
        finally:
            self.seconds[case.commit_id] = time.perf_counter() - started

    def run_case(self, case: Case) -> None:
        kind = KINDS[case.kind_name]
        setup_table(self.clean, case.name, kind)
        before = read(self.clean, case.name, kind)[1]
        after = kind.after(before)
        table = self.faulty.load_table(case.name)
        self.arm(case.fault)
        try:
            kind.run(self.faulty, table, case.name, case.commit_id)
            case.outcome = "landed"
        except CommitStateUnknownError as e:
            case.outcome, case.snapshot_id = "unknown", e.snapshot_id
        except CommitFailedError:
            case.outcome = "not landed"
        finally:
            self.arm(None)
        self.check(case, kind, before, after)

    def check(self, case: Case, kind: Kind, before: Rows, after: Rows) -> None:
        table, rows = read(self.clean, case.name, kind)
        where = f"{case.commit_id}: {case.outcome}"
        assert rows in (before, after), f"{where}: the rows are neither the before nor the after state"
        if case.outcome == "landed":
            assert rows == after, where
        elif case.outcome == "not landed":
            assert rows == before, where
        else:
            assert case.snapshot_id is not None, f"{where}: the error does not name the snapshot to look for"
            landed = table.metadata.snapshot_by_id(case.snapshot_id) is not None
            assert rows == (after if landed else before), where
        snapshots = len(table.snapshots())
        # A retry of the same work with the same commit id: the after state, nothing more.
        retried = self.clean.load_table(case.name)
        kind.run(self.clean, retried, case.name, case.commit_id)
        table, rows = read(self.clean, case.name, kind)
        assert rows == after, f"{where}: a retry with the same commit id did not leave the after state"
        if case.outcome == "landed" and kind.idempotent_by_id:
            assert len(table.snapshots()) == snapshots, f"{where}: the retry committed again"
        # Orphan removal removes only files no snapshot references, and the table stays whole.
        removed = remove_orphan_files(table, older_than=int(time.time() * 1000) + 60_000)
        referenced = referenced_files(table)
        assert not {normalize_path(p) for p in removed.orphan_file_locations} & referenced, where
        present = {normalize_path(f.path) for f in list_table_files(table)}
        location = normalize_path(table.location)
        # Data, delete, manifest and manifest-list files of every snapshot (the metadata log may
        # name files the catalog expires on its own).
        missing = sorted(p for p in referenced if p.startswith(location) and p not in present
                         and p.endswith((".parquet", ".avro", ".puffin")))
        assert not missing, f"{where}: files the table references are gone: {missing[:3]}"
        table, rows = read(self.clean, case.name, kind)
        assert rows == after, where
        self.oracle_reads.append((case, table.metadata_location, kind.branch, after))
        self.cases.append(case)

    def finish(self, label: str) -> Counter[str]:
        """Java's reads of every case's table, in one batch; the counts of the outcomes."""
        started = time.perf_counter()
        # One Spark query of the Java reference reads every table (a view of each, in a union):
        # one job instead of one per table.
        batch = oracle.OracleBatch()
        views = []
        for i, (_, location, branch, _) in enumerate(self.oracle_reads):
            options = f"path '{location}'" + (f", branch '{branch}'" if branch else "")
            views.append(f"CREATE OR REPLACE TEMPORARY VIEW case_{i} USING iceberg OPTIONS ({options})")
        union = " UNION ALL ".join(
            f"SELECT {i} AS c, id, n, {'x' if case.kind_name == 'merge_columns' else 'CAST(NULL AS BIGINT)'} AS x "
            f"FROM case_{i}" for i, (case, _, _, _) in enumerate(self.oracle_reads))
        batch.sql(*views, union)
        java = oracle.check(batch.run()[0])["rows"]
        print(f"\nJava read {len(self.oracle_reads)} tables in {time.perf_counter() - started:.1f} s")
        for i, (case, _, _, after) in enumerate(self.oracle_reads):
            got = sorted(tuple(r[1:]) for r in java if r[0] == i)
            assert got == after, f"Java reads {case.commit_id} differently: {got} != {after}"
        counts = Counter(c.outcome for c in self.cases)
        print(f"\nfault matrix on {label}: {len(self.cases)} cases, {counts['landed']} landed, "
              f"{counts['not landed']} not landed, {counts['unknown']} unknown; cases took "
              f"{sum(self.seconds.values()):.1f} s, the slowest "
              + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(self.seconds.items(), key=lambda kv: -kv[1])[:4]))
        return counts


# -- REST: faults of the HTTP hop ------------------------------------------------------------------


def test_fault_matrix_on_the_rest_catalog(served_catalog: RestService) -> None:
    proxy = FaultProxy(served_catalog.uri)
    clean = tablestore.load_catalog("rest", type="rest", uri=served_catalog.uri, token=WRITE_TOKEN)
    faulty = tablestore.load_catalog("rest", type="rest", uri=proxy.uri, token=WRITE_TOKEN)

    def arm(fault: str | None) -> None:
        proxy.up() if fault is None else proxy.arm(fault)

    try:
        clean.create_namespace("db")
        matrix = Matrix(clean, faulty, arm)
        for fault in ("lost", "refused", "reset", "down"):
            for kind in KINDS:
                matrix.run(Case("rest", kind, fault))
        counts = matrix.finish("REST")
        assert proxy.commits_faulted == len(matrix.cases)
        # The catalog gone after the commit was sent: nobody can tell, and the error says what to check.
        assert counts["unknown"] >= len(KINDS)
    finally:
        proxy.close()
        clean.close()
        faulty.close()
        served_catalog.reset()


# -- SQL catalogs: faults at the database's COMMIT ---------------------------------------------------


def sql_matrix(uri: str, warehouse: str, faults: tuple[str, ...], label: str, admin_uri: str | None = None) -> None:
    clean = tablestore.load_catalog("c", type="sql", uri=uri, warehouse=warehouse)
    faulty = tablestore.load_catalog("c", type="sql", uri=uri, warehouse=warehouse)
    fault = DatabaseFault(faulty.engine, admin_uri)  # type: ignore[attr-defined]
    try:
        clean.create_namespace("db")
        matrix = Matrix(clean, faulty, fault.arm)
        for name in faults:
            for kind in KINDS:
                matrix.run(Case(label, kind, name))
        counts = matrix.finish(label)
        # Every database fault here is resolved by reloading: the outcome is always known.
        assert counts["unknown"] == 0
    finally:
        clean.close()
        faulty.close()


def test_fault_matrix_on_the_sqlite_catalog(tmp_path: Path) -> None:
    sql_matrix(f"sqlite:///{tmp_path}/c.db", str(tmp_path / "wh"), ("lost", "refused"), "sqlite")


@pytest.mark.postgres
def test_fault_matrix_on_the_postgresql_catalog(tmp_path: Path, postgres_uri: str) -> None:
    sql_matrix(postgres_uri, str(tmp_path / "wh"), ("lost", "terminate"), "postgres", admin_uri=postgres_uri)


# -- the writer killed just after the swap -------------------------------------------------------------

KILLED_WRITER = """
import json, os, sys
import tablestore
from tests.faults import DatabaseFault
from tests.table.test_commit_faults import KINDS
uri, warehouse, cases = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
signals = {}
for name, kind, commit_id in cases:
    pid = os.fork()
    if pid == 0:
        catalog = tablestore.load_catalog("c", type="sql", uri=uri, warehouse=warehouse)
        DatabaseFault(catalog.engine).arm("kill")
        KINDS[kind].run(catalog, catalog.load_table(name), name, commit_id)
        os._exit(0)  # not reached: the swap's COMMIT kills the process
    status = os.waitpid(pid, 0)[1]
    signals[name] = os.WTERMSIG(status) if os.WIFSIGNALED(status) else -os.WEXITSTATUS(status)
print(json.dumps(signals))
"""


def test_a_writer_killed_just_after_the_swap_leaves_the_after_state_and_a_retry_applies_nothing(
        tmp_path: Path) -> None:
    uri, warehouse = f"sqlite:///{tmp_path}/c.db", str(tmp_path / "wh")
    catalog = tablestore.load_catalog("c", type="sql", uri=uri, warehouse=warehouse)
    catalog.create_namespace("db")
    cases = [Case("killed", kind, "kill") for kind in KINDS]
    before = {}
    for case in cases:
        kind = KINDS[case.kind_name]
        setup_table(catalog, case.name, kind)
        before[case.name] = read(catalog, case.name, kind)[1]
    # One subprocess forks a writer per case (imports paid once).
    result = subprocess.run([sys.executable, "-c", KILLED_WRITER, uri, warehouse,
                             json.dumps([[c.name, c.kind_name, c.commit_id] for c in cases])],
                            capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[2])
    assert result.returncode == 0, result.stderr[-3000:]
    signals = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(signals.values()) == {9}, signals  # every writer died by SIGKILL at its swap
    matrix = Matrix(catalog, catalog, lambda fault: None)
    for case in cases:
        case.outcome = "landed"  # the swap committed; the writer never heard it
        kind = KINDS[case.kind_name]
        matrix.check(case, kind, before[case.name], kind.after(before[case.name]))
    counts = matrix.finish("sqlite, writer SIGKILLed after the swap")
    assert counts["landed"] == len(KINDS)
    catalog.close()


# -- the catalog service's own swap ----------------------------------------------------------------


@pytest.mark.postgres
def test_the_service_keeps_a_metadata_file_its_database_may_have_swapped_in_and_answers_504(
        tmp_path: Path, postgres_uri: str) -> None:
    """The service on PostgreSQL swaps with one UPDATE in autocommit mode: a connection lost
    after it (the swap landed) or killed before it (it did not) are both an unknown outcome to
    the service, which keeps the new metadata file and answers 504 CommitStateUnknownException."""
    from tablestore.rest.errors import status_of
    from tablestore.rest.state.served_catalog import ServedSqlCatalog

    catalog = ServedSqlCatalog("served", uri=postgres_uri, warehouse=str(tmp_path / "wh"))
    fault = DatabaseFault(catalog._swap_engine, admin_uri=postgres_uri)  # the engine the swap runs on
    try:
        catalog.create_namespace("db")
        table = catalog.create_table("db.t", schema=SCHEMA)
        table.append(pa.table({"id": [1], "n": [1]}, SCHEMA))
        for name, lands in (("lost-after-swap", True), ("terminate-before-swap", False)):
            before = catalog.load_table("db.t")
            fault.arm(name)
            with pytest.raises(CommitStateUnknownError) as unknown:
                catalog.commit_table(("db", "t"), *properties_change(before))
            fault.arm(None)
            assert status_of(unknown.value) == (504, "CommitStateUnknownException"), name
            new_location = str(unknown.value).rsplit("New metadata: ", 1)[-1]
            assert catalog.io.new_input(new_location).exists(), f"{name}: the service deleted a metadata file it may have swapped in"
            after = catalog.load_table("db.t")
            assert (after.metadata_location == new_location) is lands, name
            assert rows_of(after.scan().to_arrow()) == [(1, 1, None)]
    finally:
        catalog.close()


def properties_change(table: Table) -> tuple[list[Any], list[Any]]:
    """The requirements and updates of setting one table property on ``table`` as it is."""
    from tablestore.spec.metadata.update_models import AssertTableUUID, SetPropertiesUpdate

    return [AssertTableUUID(uuid=table.metadata.table_uuid)], [SetPropertiesUpdate(updates={"k": str(time.time())})]
