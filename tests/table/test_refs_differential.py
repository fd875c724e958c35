"""Differential test of branches and tags: random writes on two branches, rollbacks, cherry-picks,
fast-forwards and tags, checked after every step against a model of each snapshot's rows, and
every ref of every step read again by Java Iceberg (``../shared/iceberg-oracle``, Spark's
``branch`` and ``tag`` read options) from that step's metadata file.

The model knows only what the operations mean: a snapshot's rows, its parent, which snapshot
each ref points at, and which snapshots are appends (the ones that can be cherry-picked). It
decides on its own whether an operation must be refused (a rollback to a non-ancestor, a
fast-forward of diverged branches, a second pick of one snapshot) and then checks that the
table refused it with nothing committed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pyarrow as pa
import pytest

from tablestore.catalog import Catalog
from tablestore.errors import ValidationError
from tablestore.table import Table
from tests import oracle
from tests.conftest import SQLITE_ONLY

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
BRANCHES = ("main", "dev")
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
        target = rng.choice(sorted(model.rows))
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
        picked = rng.choice(sorted(model.appended))
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
    target = rng.choice(sorted(model.rows))
    table.manage_snapshots().set_current_snapshot(target, branch=branch).commit()
    model.refs[branch] = target
    return f"set {branch} to {target}"


@SQLITE_ONLY
def test_random_branch_histories_match_the_model_and_java(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    reads = oracle.OracleBatch()  # one JVM for every seed's reads
    expected: list[tuple[int, str, Rows, list[str]]] = []
    for seed in (7, 1234):
        expected.extend(run_history(catalog, seed, reads))
    results = reads.run()
    for job, ref, ids, done in expected:
        rows = oracle.check(results[job])["rows"]
        assert rows_of(r[0] for r in rows) == ids, (ref, job, done)


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
    kinds = {d.split()[0] for d in done}
    assert {"append", "delete", "overwrite", "cherrypick", "rollback", "tag", "set", "refused"} <= kinds, done
    assert any("fast-forward" in d for d in done), done  # made or refused: the branches diverge fast
    return expected
