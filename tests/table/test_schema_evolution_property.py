"""Property: random sequences of add, drop, rename, reorder, widen and insert read, after every
step, exactly like a plain in-memory model of the same sequence; the final tables read the same
in the Java reference implementation and in pyiceberg.

The model knows nothing of field ids: a column is a key, a renamed column keeps its key, a
dropped one is gone, an added one starts NULL for existing rows, a widened one keeps its values.
Changes the rules refuse (a duplicate name, dropping the last column) must raise and commit nothing.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tablestore
from tablestore.errors import SchemaEvolutionError
from tests import oracle
from tests.values import oracle_rows

NAMES = ["a", "b", "c", "d", "e"]
ARROW = {"int": pa.int32(), "bigint": pa.int64(), "float": pa.float32(), "double": pa.float64(), "string": pa.string()}
WIDER = {"int": "bigint", "bigint": "double", "float": "double"}

Op = tuple[Any, ...]

ops = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(NAMES), st.sampled_from(["int", "bigint", "float", "string"]),
              st.one_of(st.none(), st.just(-1), st.integers(0, 5))),
    st.tuples(st.just("drop"), st.integers(0, 5)),
    st.tuples(st.just("rename"), st.integers(0, 5), st.sampled_from(NAMES)),
    st.tuples(st.just("move"), st.integers(0, 5), st.one_of(st.none(), st.integers(0, 5))),
    st.tuples(st.just("widen"), st.integers(0, 5)),
    st.tuples(st.just("insert"), st.integers(1, 3)),
)


@dataclass
class Column:
    key: int
    name: str
    type: str


@dataclass
class Model:
    columns: list[Column]
    rows: list[dict[int, Any]] = field(default_factory=list)
    keys: itertools.count[int] = field(default_factory=lambda: itertools.count(100))

    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def expected(self) -> list[list[Any]]:
        return sorted(([r.get(c.key) for c in self.columns] for r in self.rows), key=repr)


def _value(t: str, n: int) -> Any:
    if t in ("int", "bigint"):
        return n
    if t in ("float", "double"):
        return n + 0.5
    return f"s{n}"


def refused(model: Model, op: Op) -> bool:
    """Whether the rules refuse ``op`` on the model's current state."""
    cols = model.columns
    kind = op[0]
    if kind == "add":
        return op[1].lower() in (n.lower() for n in model.names())
    if kind == "drop":
        return len(cols) == 1
    if kind == "rename":
        target = cols[op[1] % len(cols)]
        return any(c.name.lower() == op[2].lower() and c is not target for c in cols)
    if kind == "move" and op[2] is not None:
        return cols[op[1] % len(cols)] is cols[op[2] % len(cols)]
    return False


def apply(table: tablestore.Table, model: Model, op: Op, counter: itertools.count[int]) -> None:
    """Apply ``op`` to the table, then to the model; a refused op must fail and change nothing."""
    kind = op[0]
    cols = model.columns
    before = table.metadata_location
    expect_refusal = refused(model, op)
    try:
        if kind == "add":
            _, name, t, pos = op
            anchor = cols[pos] if pos is not None and 0 <= pos < len(cols) else None
            with table.update_schema() as u:
                if pos == -1:
                    u.add_column(name, t, first=True)
                elif anchor is not None:
                    u.add_column(name, t, after=anchor.name)
                else:
                    u.add_column(name, t)
            column = Column(next(model.keys), name, t)
            cols.insert(0 if pos == -1 else cols.index(anchor) + 1 if anchor is not None else len(cols), column)
        elif kind == "drop":
            target = cols[op[1] % len(cols)]
            with table.update_schema() as u:
                u.drop_column(target.name)
            cols.remove(target)
        elif kind == "rename":
            target = cols[op[1] % len(cols)]
            with table.update_schema() as u:
                u.rename_column(target.name, op[2])
            target.name = op[2]
        elif kind == "move":
            target = cols[op[1] % len(cols)]
            after = cols[op[2] % len(cols)] if op[2] is not None else None
            with table.update_schema() as u:
                if after is None:
                    u.move_first(target.name)
                else:
                    u.move_after(target.name, after.name)
            cols.remove(target)
            cols.insert(0 if after is None else cols.index(after) + 1, target)
        elif kind == "widen":
            target = cols[op[1] % len(cols)]
            wider = WIDER.get(target.type)
            if wider is None:
                return
            with table.update_schema() as u:
                u.widen(target.name, wider)
            for r in model.rows:
                if r.get(target.key) is not None and wider == "double":
                    r[target.key] = float(r[target.key])
            target.type = wider
        elif kind == "insert":
            new_rows = [{c.key: _value(c.type, n) for c in cols} for n in itertools.islice(counter, op[1])]
            table.append(pa.table({c.name: pa.array([r[c.key] for r in new_rows], ARROW[c.type]) for c in cols}))
            model.rows.extend(new_rows)
    except SchemaEvolutionError:
        assert expect_refusal, f"{op} was refused but the model allows it"
        assert table.refresh().metadata_location == before, f"{op} failed but committed"
        return
    assert not expect_refusal, f"{op} should have been refused"


def run_sequence(root: Path, sequence: list[Op]) -> tuple[tablestore.Table, Model]:
    where = root / uuid.uuid4().hex[:8]
    catalog = tablestore.load_catalog("p", type="sql", uri=f"sqlite:///{where}.db", warehouse=str(where))
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", schema=pa.schema([("a", pa.int32()), ("b", pa.string())]))
    model = Model([Column(1, "a", "int"), Column(2, "b", "string")])
    counter = itertools.count()
    for op in sequence:
        apply(table, model, op, counter)
        result = table.scan().to_arrow()
        assert result.column_names == model.names(), op
        assert [str(f.type) for f in result.schema] == [str(ARROW[c.type]) for c in model.columns], op
        ours = sorted((list(r.values()) for r in result.to_pylist()), key=repr)
        assert ours == model.expected(), op
    return table, model


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=st.lists(ops, max_size=12))
def test_random_evolution_reads_like_the_model(tmp_path: Path, sequence: list[Op]) -> None:
    run_sequence(tmp_path, sequence)


@pytest.mark.oracle
def test_final_tables_read_identically_by_oracle_and_pyiceberg(tmp_path: Path) -> None:
    from pyiceberg.table import StaticTable

    finals: list[tablestore.Table] = []

    @settings(max_examples=12, deadline=None, database=None)
    @given(sequence=st.lists(ops, min_size=4, max_size=12))
    def collect(sequence: list[Op]) -> None:
        table, _ = run_sequence(tmp_path, [*sequence, ("insert", 2)])
        finals.append(table)

    collect()
    batch = oracle.OracleBatch()
    jobs = [batch.read(t.metadata_location) for t in finals]
    results = batch.run()
    for table, job in zip(finals, jobs, strict=True):
        ours = oracle_rows(table.scan().to_arrow())
        theirs = oracle.check(results[job])
        assert [c["name"] for c in theirs["columns"]] == table.schema().column_names
        assert theirs["rows"] == ours, table.metadata_location
        py = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
        assert oracle_rows(py) == ours, table.metadata_location
