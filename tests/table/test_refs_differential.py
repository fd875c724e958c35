"""Differential test of branches and tags: random writes on two branches, rollbacks, cherry-picks,
fast-forwards and tags, checked after every step against a model of each snapshot's rows, and
every ref of every step read again by Java Iceberg (``../shared/iceberg-oracle``, Spark's
``branch`` and ``tag`` read options) from that step's metadata file. In the same JVM, Java makes
a table with a branch and a tag (its own DDL and writes), which we then read and write on.

The model knows only what the operations mean: a snapshot's rows, its parent, which snapshot
each ref points at, and which snapshots are appends (the ones that can be cherry-picked). It
decides on its own whether an operation must be refused (a rollback to a non-ancestor, a
fast-forward of diverged branches, a second pick of one snapshot) and then checks that the
table refused it with nothing committed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from tablestore.catalog.base import Catalog
from tablestore.errors import ValidationError
from tablestore.table import Table
from tests import oracle

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
BRANCHES = ("main", "dev")
SEEDS = (12, 21)  # together (each, too) they make every operation and every refusal
Rows = tuple[int, ...]  # a snapshot's ids, sorted, with repeats: a file added twice shows twice


def rows_of(ids: object) -> Rows:
    return tuple(sorted(ids))  # type: ignore[call-overload]


@dataclass
class Model:
    rows: dict[int, Rows] = field(default_factory=dict)  # snapshot id -> ids
    parent: dict[int, int | None] = field(default_factory=dict)
    appended: dict[int, Rows] = field(default_factory=dict)  # append snapshots -> ids added
    source: dict[int, int] = field(default_factory=dict)  # a cherry-picked copy -> the snapshot picked
    refs: dict[str, int] = field(default_factory=dict)
    tags: set[str] = field(default_factory=set)
    #: Snapshot ids in the order they were made: random choices pick by position, so a seed
    #: replays the same history whatever ids the table draws.
    order: list[int] = field(default_factory=list)

    def lineage(self, snapshot_id: int | None) -> list[int]:
        out = []
        while snapshot_id is not None:
            out.append(snapshot_id)
            snapshot_id = self.parent[snapshot_id]
        return out

    def record(self, branch: str, snapshot_id: int, ids: Rows, parent: int | None) -> None:
        self.rows[snapshot_id] = ids
        self.parent[snapshot_id] = parent
        self.refs[branch] = snapshot_id
        self.order.append(snapshot_id)


def table_ids(table: Table, ref: str) -> Rows:
    return rows_of(table.scan(ref=ref).to_arrow()["id"].to_pylist())


def step(rng: random.Random, table: Table, model: Model, counter: list[int]) -> str:
    """One random operation on the table and the model; what it did."""
    branch = rng.choice(BRANCHES)
    head = model.refs[branch]
    choice = rng.choice(["append", "append", "append", "delete", "overwrite", "rollback", "cherrypick",
                         "cherrypick", "fast_forward", "tag", "set_current"])
    if choice == "append":
        new = rows_of(range(counter[0], counter[0] + rng.randint(1, 4)))
        counter[0] += len(new)
        snap = table.append(pa.table({"id": list(new), "v": [f"v{i}" for i in new]}, schema=SCHEMA),
                            branch=branch)
        model.record(branch, snap.snapshot_id, rows_of(model.rows[head] + new), head)
        model.appended[snap.snapshot_id] = new
        return f"append {sorted(new)} to {branch}"
    if choice in ("delete", "overwrite"):
        present = sorted(set(model.rows[head]))
        if not present:
            return f"skip {choice} on {branch}: no rows"
        doomed = set(rng.sample(present, min(len(present), rng.randint(1, 3))))
        condition = f"id IN ({', '.join(map(str, sorted(doomed)))})"
        kept = rows_of(i for i in model.rows[head] if i not in doomed)
        if choice == "delete":
            table.delete(condition, branch=branch)
            ids = kept
        else:
            new_id = counter[0]
            counter[0] += 1
            table.overwrite(pa.table({"id": [new_id], "v": ["o"]}, schema=SCHEMA), condition, branch=branch)
            ids = rows_of((*kept, new_id))
        model.record(branch, table.refresh().refs()[branch].snapshot_id, ids, head)
        return f"{choice} {condition} on {branch}"
    if choice == "rollback":
        target = rng.choice(model.order)
        if target in model.lineage(head):
            table.manage_snapshots().rollback_to_snapshot(target, branch=branch).commit()
            model.refs[branch] = target
            return f"rollback {branch} to {target}"
        before = table.refresh().metadata_location
        with pytest.raises(ValidationError, match="not an ancestor"):
            table.manage_snapshots().rollback_to_snapshot(target, branch=branch).commit()
        assert table.refresh().metadata_location == before
        return f"refused rollback of {branch} to {target}"
    if choice == "cherrypick":
        picked = rng.choice([i for i in model.order if i in model.appended])
        lineage = model.lineage(head)
        already = picked in lineage or any(model.source.get(s) == picked for s in lineage)
        if already:
            before = table.refresh().metadata_location
            with pytest.raises(ValidationError, match="already an ancestor|picked already"):
                table.manage_snapshots().cherrypick(picked, branch=branch).commit()
            assert table.refresh().metadata_location == before
            return f"refused second pick of {picked} onto {branch}"
        table.manage_snapshots().cherrypick(picked, branch=branch).commit()
        new_head = table.refresh().refs()[branch].snapshot_id
        if model.parent[picked] == head:
            assert new_head == picked  # a fast-forward
            model.refs[branch] = picked
        else:
            model.record(branch, new_head, rows_of(model.rows[head] + model.appended[picked]), head)
            model.source[new_head] = picked
            model.appended[new_head] = model.appended[picked]
        return f"cherrypick {picked} onto {branch}"
    if choice == "fast_forward":
        other = "dev" if branch == "main" else "main"
        if head in model.lineage(model.refs[other]):
            table.manage_snapshots().fast_forward(branch, other).commit()
            model.refs[branch] = model.refs[other]
            return f"fast-forward {branch} to {other}"
        before = table.refresh().metadata_location
        with pytest.raises(ValidationError, match="diverged"):
            table.manage_snapshots().fast_forward(branch, other).commit()
        assert table.refresh().metadata_location == before
        return f"refused fast-forward of {branch} to {other}"
    if choice == "tag":
        name = f"t{len(model.tags)}"
        table.manage_snapshots().create_tag(head, name).commit()
        model.tags.add(name)
        model.refs[name] = head
        return f"tag {name} at {branch}'s head"
    target = rng.choice(model.order)
    table.manage_snapshots().set_current_snapshot(target, branch=branch).commit()
    model.refs[branch] = target
    return f"set {branch} to {target}"


@dataclass
class JavaReads:
    """One JVM for the module: Java's reads of both random histories, and a table Java made
    with branches and tags for us to read."""

    results: list[dict[str, Any]]
    expected: list[tuple[int, str, Rows, list[str]]]
    java_made: int  # the job that made Java's table
    warehouse: Path


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> JavaReads:
    root = tmp_path_factory.mktemp("refs-differential")
    catalog = tablestore.load_catalog("diff", type="sql", uri=f"sqlite:///{root}/c.db", warehouse=str(root / "wh"))
    catalog.create_namespace("db")
    reads = oracle.OracleBatch(warehouse=str(root / "java"))
    expected: list[tuple[int, str, Rows, list[str]]] = []
    for seed in SEEDS:
        expected.extend(run_history(catalog, seed, reads))
    # Together the histories make every operation, and have each kind of refusal refused.
    done = {d for *_, steps in expected for d in steps}
    kinds = {d.split()[0] for d in done}
    assert {"append", "delete", "overwrite", "cherrypick", "rollback", "tag", "set", "fast-forward"} <= kinds, done
    assert {" ".join(d.split()[:2]) for d in done if d.startswith("refused")} >= {
        "refused rollback", "refused fast-forward", "refused second"}, done
    made = reads.sql(
        "CREATE TABLE ref.db.b (id BIGINT, name STRING) USING iceberg TBLPROPERTIES ('format-version'='2')",
        "INSERT INTO ref.db.b VALUES (1, 'a'), (2, 'b')",
        "ALTER TABLE ref.db.b CREATE TAG v1 RETAIN 7 DAYS",
        "ALTER TABLE ref.db.b CREATE BRANCH audit WITH SNAPSHOT RETENTION 3 SNAPSHOTS",
        "INSERT INTO ref.db.b.branch_audit VALUES (3, 'c')",
        "DELETE FROM ref.db.b.branch_audit WHERE id = 1",
        "INSERT INTO ref.db.b VALUES (4, 'd')",
        "SELECT id FROM ref.db.b.branch_audit",
    )
    catalog.close()
    return JavaReads(reads.run(), expected, made, root / "java")


def test_random_branch_histories_match_the_model_and_java(java: JavaReads) -> None:
    for job, ref, ids, done in java.expected:
        rows = oracle.check(java.results[job])["rows"]
        assert rows_of(r[0] for r in rows) == ids, (ref, job, done)


def test_we_read_the_branches_and_tags_java_makes_and_write_on_from_them(java: JavaReads, tmp_path: Path) -> None:
    theirs = oracle.check(java.results[java.java_made])
    assert sorted(r[0] for r in theirs["rows"]) == [2, 3]
    metadata = sorted((java.warehouse / "db" / "b" / "metadata").glob("v*.metadata.json"))[-1]
    catalog = tablestore.load_catalog("t", type="sql", uri=f"sqlite:///{tmp_path}/c.db", warehouse=str(tmp_path / "ours"))
    catalog.create_namespace("db")
    table = catalog.register_table("db.b", str(metadata))
    refs = table.refs()
    assert (refs["v1"].type, refs["v1"].max_ref_age_ms) == ("tag", 7 * 86_400_000)
    assert (refs["audit"].type, refs["audit"].min_snapshots_to_keep) == ("branch", 3)

    def ids(ref: str | None = None) -> list[int]:
        return sorted(table.scan(ref=ref).to_arrow()["id"].to_pylist())

    assert (ids(), ids("audit"), ids("v1")) == ([1, 2, 4], [2, 3], [1, 2])
    # And we write on from Java's branch: its head is the parent, its retention stays.
    table.append(pa.table({"id": pa.array([5], pa.int64()), "name": ["e"]}), branch="audit")
    assert ids("audit") == [2, 3, 5] and table.refs()["audit"].min_snapshots_to_keep == 3


def run_history(catalog: Catalog, seed: int, reads: oracle.OracleBatch) -> list[tuple[int, str, Rows, list[str]]]:
    """30 random steps on a new table, checked against the model after each; the Java reads to make."""
    rng = random.Random(seed)
    table = catalog.create_table(f"db.t{seed}", SCHEMA)
    first = table.append(pa.table({"id": [0, 1], "v": ["a", "b"]}, schema=SCHEMA))
    table.manage_snapshots().create_branch(first.snapshot_id, "dev").commit()
    model = Model()
    model.record("main", first.snapshot_id, (0, 1), None)
    model.refs["dev"] = first.snapshot_id
    model.appended[first.snapshot_id] = (0, 1)
    counter = [2]
    expected: list[tuple[int, str, Rows, list[str]]] = []
    done: list[str] = []
    seen: set[tuple[str, int]] = set()
    for _ in range(30):
        done.append(step(rng, table, model, counter))
        table.refresh()
        for ref, snapshot_id in sorted(model.refs.items()):
            assert table.refs()[ref].snapshot_id == snapshot_id, done
            assert table_ids(table, ref) == model.rows[snapshot_id], (ref, done)
            if (ref, snapshot_id) in seen:
                continue  # Java reads each position of each ref once, from the step that made it
            seen.add((ref, snapshot_id))
            kind = "tag" if ref in model.tags else "branch"
            job = reads.read(table.metadata_location, columns=["id"], **{kind: ref})  # type: ignore[arg-type]
            expected.append((job, ref, model.rows[snapshot_id], done))
    return expected
