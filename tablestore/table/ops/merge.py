"""MERGE INTO on the local engine (or the table's engine): a builder in delta-rs's style.

    result = (table.merge(updates, on="t.id = s.id")
              .when_matched_update({"name": "s.name"})
              .when_matched_delete("s.deleted")
              .when_not_matched_insert_all()
              .execute())
    result.updated, result.deleted, result.inserted

The ON condition must contain at least one equality between a target column and a source
column (``t.id = s.id``); those equalities are the join keys, the rest of the condition is
checked on the joined pairs. Clauses are tried in the order given and the first whose
condition holds acts; a target row that matches more than one source row is an error (as in
Spark and Iceberg). Conditions and values are SQL expressions over ``t.<col>`` and ``s.<col>``
(see :mod:`tablestore.table.ops.row_expressions` for the subset).

Only the target files that may hold the source's keys are read (an IN or range filter on the
keys prunes manifests and files); they are then changed as DELETE and UPDATE change files, by
``write.merge.mode``, and everything commits once, validated under
``write.merge.isolation-level``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from tablestore.engine.sources import dataframe_source
from tablestore.errors import SchemaError, UnsupportedError, ValidationError
from tablestore.io.cleanup import deleted_unless_sent
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.expression_tree import (
    AlwaysTrue,
    And,
    BooleanExpression,
    GreaterThanOrEqual,
    In,
    LessThanOrEqual,
    Reference,
)
from tablestore.table.ops.row_expressions import ArrowEvaluator, parse_expression
from tablestore.table.ops.row_level import (
    MERGE_ON_READ,
    FileChange,
    RowLevelContext,
    RowLevelOperation,
    as_sql,
    change_file,
    check_assignable,
    commit_changes,
    discard,
    read_live_rows,
    updated_rows,
    write_mode,
)
from tablestore.table.read.scan import FileTask, plan_files
from tablestore.table.update.identity import CommitIdentity
from tablestore.table.write.conform import conform_to_schema, downcast_ns_requested, to_arrow_table

if TYPE_CHECKING:
    from tablestore.table import Table

# Up to this many distinct source keys prune target files with IN; more with a min/max range.
IN_PRUNING_LIMIT = 10_000
STREAMING_MESSAGE = "DELETE/UPDATE TABLE is not supported for streaming mode now"


@dataclass(frozen=True)
class Clause:
    kind: str  # "update", "delete", "insert"
    condition: str | None = None
    values: tuple[tuple[str, str], ...] | None = None  # None: every column from the source (update/insert all)


@dataclass
class MergeResult:
    updated: int = 0
    deleted: int = 0
    inserted: int = 0

    @property
    def affected(self) -> int:
        return self.updated + self.deleted + self.inserted


@dataclass
class _FileOutcome:
    change: FileChange | None
    matched_source: np.ndarray
    updated: int = 0
    deleted: int = 0


@dataclass
class _Plan:
    """The parsed ON condition: join keys (target column, source column) and the residual."""

    keys: list[tuple[str, str]]
    residual: str | None
    clauses_matched: list[Clause] = field(default_factory=list)
    clauses_not_matched: list[Clause] = field(default_factory=list)


class MergeBuilder:
    def __init__(self, table: Table, source: Any, on: str | exp.Expr, source_alias: str = "s",
                 target_alias: str = "t") -> None:
        adapted = dataframe_source(source)
        if adapted is not None:  # another library's DataFrame (Spark's)
            if adapted.is_streaming:
                raise UnsupportedError(STREAMING_MESSAGE)
            source = adapted.to_arrow()
        self.table = table
        self.source = to_arrow_table(source)
        self.on = on
        self.source_alias = source_alias
        self.target_alias = target_alias
        if source_alias.lower() == target_alias.lower():
            raise ValidationError("the source and target aliases of MERGE must differ")
        self.matched: list[Clause] = []
        self.not_matched: list[Clause] = []

    # -- clauses ------------------------------------------------------------------------------------
    def when_matched_update(self, set: dict[str, Any], condition: str | None = None) -> MergeBuilder:
        self.matched.append(Clause("update", condition, self._values(set)))
        return self

    def when_matched_update_all(self, condition: str | None = None) -> MergeBuilder:
        self.matched.append(Clause("update", condition, None))
        return self

    def when_matched_delete(self, condition: str | None = None) -> MergeBuilder:
        self.matched.append(Clause("delete", condition))
        return self

    def when_not_matched_insert(self, values: dict[str, Any], condition: str | None = None) -> MergeBuilder:
        self.not_matched.append(Clause("insert", condition, self._values(values)))
        return self

    def when_not_matched_insert_all(self, condition: str | None = None) -> MergeBuilder:
        self.not_matched.append(Clause("insert", condition, None))
        return self

    def _values(self, values: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        out = []
        for key, value in values.items():
            name = key.split(".", 1)[1] if key.lower().startswith(f"{self.target_alias.lower()}.") else key
            out.append((name, as_sql(value)))
        return tuple(out)

    # -- execution -----------------------------------------------------------------------------------
    def execute(self, commit_id: str | CommitIdentity | None = None) -> MergeResult:
        """Run the MERGE in one commit. ``commit_id``: a retried job whose first commit landed
        gets that commit back and applies nothing twice."""
        table = self.table
        schema = table.schema()
        plan = self._plan()
        self._check(plan)
        snapshot = table.current_snapshot()
        ctx = RowLevelContext.of(table, write_mode(table.properties, RowLevelOperation.MERGE))
        source = self.source
        prune = self._pruning_filter(plan)
        tasks = plan_files(table.io, table.metadata, snapshot, schema, bind(schema, prune), table.engine) \
            if snapshot is not None and self.source.num_rows else []
        job = _MatchJob(ctx, source, plan, self.target_alias, self.source_alias)
        if ctx.mode == MERGE_ON_READ:
            job.columns = self._target_columns(plan)
        outcomes = table.engine.map(job, tasks)
        changes = [o.change for o in outcomes if o.change is not None]
        result = MergeResult(updated=sum(o.updated for o in outcomes), deleted=sum(o.deleted for o in outcomes))
        inserted_files: list[Any] = []
        with deleted_unless_sent(lambda: discard(table, changes)):
            if plan.clauses_not_matched and source.num_rows:
                matched = np.zeros(source.num_rows, dtype=bool)
                for o in outcomes:
                    matched[o.matched_source] = True
                rows = job.inserts(source.filter(pa.array(~matched)))
                result.inserted = rows.num_rows
                inserted_files = ctx.write_rows(rows)
        commit_changes(table, changes, snapshot, RowLevelOperation.MERGE, prune, extra_data=inserted_files,
                       commit_id=commit_id)
        return result

    def _plan(self) -> _Plan:
        # A tree is SQL's MERGE's own ON, parsed with its statement: it is read, never changed.
        tree = self.on if isinstance(self.on, exp.Expr) else parse_expression(self.on)
        conjuncts = list(tree.flatten()) if isinstance(tree, exp.And) else [tree]
        target_names = {n.lower(): n for n in self.table.schema().column_names}
        source_names = {n.lower(): n for n in self.source.column_names}
        keys: list[tuple[str, str]] = []
        residual: list[str] = []
        for c in conjuncts:
            if isinstance(c, exp.EQ) and isinstance(c.left, exp.Column) and isinstance(c.right, exp.Column):
                sides = [self._side(c.left, target_names, source_names),
                         self._side(c.right, target_names, source_names)]
                if sides[0][0] == "t" and sides[1][0] == "s":
                    keys.append((sides[0][1], sides[1][1]))
                    continue
                if sides[0][0] == "s" and sides[1][0] == "t":
                    keys.append((sides[1][1], sides[0][1]))
                    continue
            residual.append(c.sql(dialect="spark"))
        if not keys:
            raise ValidationError(
                f"the MERGE condition {self._on_text()!r} needs an equality between a target and a source column "
                f"(like {self.target_alias}.id = {self.source_alias}.id)"
            )
        return _Plan(keys, " AND ".join(f"({r})" for r in residual) or None, list(self.matched),
                     list(self.not_matched))

    def _on_text(self) -> str:
        return self.on.sql(dialect="spark") if isinstance(self.on, exp.Expr) else self.on

    def _side(self, column: exp.Column, target: dict[str, str], source: dict[str, str]) -> tuple[str, str]:
        qualifier = column.table.lower() if column.table else None
        name = column.name.lower()
        if qualifier == self.target_alias.lower() and name in target:
            return "t", target[name]
        if qualifier == self.source_alias.lower() and name in source:
            return "s", source[name]
        if qualifier is None and (name in target) != (name in source):
            return ("t", target[name]) if name in target else ("s", source[name])
        return "?", name

    def _check(self, plan: _Plan) -> None:
        """Type-check every clause on no rows, so mistakes fail before a file is written."""
        schema = self.table.schema()
        for clause in plan.clauses_matched:
            if clause.kind == "update":
                names = [n for n, _ in clause.values] if clause.values is not None else \
                    [n for n in schema.column_names if n.lower() in {c.lower() for c in self.source.column_names}
                     and n not in {schema.find_column_name(i) for i in schema.identifier_field_ids}]
                check_assignable(self.table, names)
        job = _MatchJob(RowLevelContext.of(self.table, "copy-on-write"), self.source.slice(0, 0), plan,
                        self.target_alias, self.source_alias)
        empty = schema.as_arrow().empty_table()
        job.apply_matched(empty, self.source.slice(0, 0))
        job.inserts(self.source.slice(0, 0))

    def _target_columns(self, plan: _Plan) -> set[int]:
        """Field ids of the target columns that matching and the matched clauses read or keep."""
        schema = self.table.schema()
        target = {n.lower(): n for n in schema.column_names}
        source = {n.lower() for n in self.source.column_names}
        identifier = {schema.find_column_name(i) for i in schema.identifier_field_ids}
        names = {t for t, _ in plan.keys}
        texts = [plan.residual] + [c.condition for c in plan.clauses_matched]
        for clause in plan.clauses_matched:
            if clause.kind != "update":
                continue
            if clause.values is None:
                names.update(n for n in schema.column_names if n.lower() not in source or n in identifier)
            else:
                assigned = {n.lower() for n, _ in clause.values}
                names.update(n for n in schema.column_names if n.lower() not in assigned)
                texts.extend(sql for _, sql in clause.values)
        for text in texts:
            if text is None:
                continue
            for column in parse_expression(text).find_all(exp.Column):
                qualifier = column.table.lower() if column.table else None
                if column.name.lower() in target and qualifier in (None, self.target_alias.lower()):
                    names.add(target[column.name.lower()])
        return {schema.find_field(n).field_id for n in names}

    def _pruning_filter(self, plan: _Plan) -> BooleanExpression:
        """Target rows that can match some source key: IN the keys, or within their range."""
        schema = self.table.schema()
        terms: list[BooleanExpression] = []
        for target_col, source_col in plan.keys:
            t = schema.as_arrow().field(target_col).type
            if not (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_date(t)):
                continue
            try:
                values = pc.unique(self.source.column(source_col).cast(t)).drop_null()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                continue
            if len(values) == 0:
                continue
            if len(values) <= IN_PRUNING_LIMIT:
                terms.append(In(Reference(target_col), values.to_pylist()))
            else:
                bounds = pc.min_max(values)
                terms.append(And(GreaterThanOrEqual(Reference(target_col), bounds["min"].as_py()),
                                 LessThanOrEqual(Reference(target_col), bounds["max"].as_py())))
        out: BooleanExpression = AlwaysTrue()
        for term in terms:
            out = term if isinstance(out, AlwaysTrue) else And(out, term)
        return out


class _MatchJob:
    """Matches one target file's live rows against the source and applies the matched clauses."""

    def __init__(self, ctx: RowLevelContext, source: pa.Table, plan: _Plan, target_alias: str,
                 source_alias: str) -> None:
        self.ctx = ctx
        self.source = source
        self.plan = plan
        self.target_alias = target_alias.lower()
        self.source_alias = source_alias.lower()
        # Field ids of the target columns to read (None: all). Merge-on-read needs only the
        # keys, the columns the clauses read and the columns an update keeps.
        self.columns: set[int] | None = None
        self._sorted_keys = self._sort_source_keys()

    def _sort_source_keys(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The source's integer join key sorted once, with the source row of each, for the one-key
        case with unique keys: every file then finds its matches by binary search instead of
        building a hash table of the whole source (one per file; the join dominated large upserts)."""
        if len(self.plan.keys) != 1 or self.source.num_rows == 0:
            return None
        column = self.source.column(self.plan.keys[0][1])
        if not pa.types.is_integer(column.type):
            return None
        valid = pc.is_valid(column)
        rows = np.flatnonzero(valid.to_numpy(zero_copy_only=False))
        keys = pc.drop_null(column).to_numpy()
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        if len(ordered) > 1 and bool((ordered[1:] == ordered[:-1]).any()):
            return None  # duplicate keys: the hash join pairs every one (and MERGE then refuses)
        return ordered, rows[order]

    def __call__(self, task: FileTask) -> _FileOutcome:
        # A merge-on-read match writes the updated rows anew: they keep their _row_id.
        live, positions = read_live_rows(self.ctx, task, self.columns, with_row_id=True)
        t_idx, s_idx = self._pairs(live)
        if len(t_idx) == 0:
            return _FileOutcome(None, s_idx)
        if len(np.unique(t_idx)) != len(t_idx):
            raise ValidationError(
                "MERGE matched a single row of the target table with several rows of the source; "
                "make the source's keys unique (for example with a GROUP BY or a window)"
            )
        target_rows = live.take(pa.array(t_idx))
        source_rows = self.source.take(pa.array(s_idx))
        acted, replacement, updated, deleted = self.apply_matched(target_rows, source_rows)
        affected = np.zeros(live.num_rows, dtype=bool)
        affected[t_idx[acted]] = True
        change = change_file(self.ctx, task, live, positions, affected, replacement)
        return _FileOutcome(change, s_idx, updated, deleted)

    def _pairs(self, live: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        keys = self.plan.keys
        target_column = live.column(keys[0][0])
        if self._sorted_keys is not None and target_column.type == self.source.column(keys[0][1]).type:
            t_idx, s_idx = self._search_pairs(target_column)
        else:
            t_idx, s_idx = self._join_pairs(live)
        if self.plan.residual is not None and len(t_idx):
            target_rows = live.take(pa.array(t_idx))
            source_rows = self.source.take(pa.array(s_idx))
            keep = self._evaluator(target_rows, source_rows).mask(parse_expression(self.plan.residual))
            keep_np = keep.to_numpy(zero_copy_only=False)
            t_idx, s_idx = t_idx[keep_np], s_idx[keep_np]
        return t_idx, s_idx

    def _search_pairs(self, column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
        assert self._sorted_keys is not None
        ordered, source_rows = self._sorted_keys
        values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        valid = None if values.null_count == 0 else values.is_valid().to_numpy(zero_copy_only=False)
        keys = pc.fill_null(values, 0).to_numpy(zero_copy_only=False) if valid is not None else values.to_numpy()
        at = np.minimum(np.searchsorted(ordered, keys), len(ordered) - 1)
        hit = ordered[at] == keys
        if valid is not None:
            hit &= valid  # a NULL key matches nothing
        t_idx = np.flatnonzero(hit).astype(np.int64)
        return t_idx, source_rows[at[t_idx]].astype(np.int64)

    def _join_pairs(self, live: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        keys = self.plan.keys
        left = {f"k{i}": live.column(t) for i, (t, _) in enumerate(keys)}
        left["__t"] = pa.array(np.arange(live.num_rows, dtype=np.int64))
        right = {}
        for i, (t, s) in enumerate(keys):
            column = self.source.column(s)
            target_type = live.schema.field(t).type
            try:
                right[f"k{i}"] = column.cast(target_type) if column.type != target_type else column
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise SchemaError(f"MERGE key {s} cannot be compared with {t} ({target_type}): {e}") from None
        right["__s"] = pa.array(np.arange(self.source.num_rows, dtype=np.int64))
        names = [f"k{i}" for i in range(len(keys))]
        joined = pa.table(left).join(pa.table(right), keys=names, join_type="inner")
        return joined.column("__t").to_numpy(), joined.column("__s").to_numpy()

    def _evaluator(self, target: pa.Table | None, source: pa.Table) -> ArrowEvaluator:
        target_names = {n.lower(): n for n in target.column_names} if target is not None else {}
        source_names = {n.lower(): n for n in source.column_names}

        def resolve(qualifier: str | None, name: str) -> Any:
            q, n = (qualifier or "").lower(), name.lower()
            if q == self.target_alias or (not q and n in target_names and n not in source_names):
                if target is None:
                    raise ValidationError(f"{qualifier or ''}.{name}: a NOT MATCHED clause cannot read target columns")
                if n not in target_names:
                    raise SchemaError(f"unknown target column {name!r}; the columns are "
                                      f"{', '.join(target_names.values())}")
                return target.column(target_names[n])
            if q == self.source_alias or (not q and n in source_names and n not in target_names):
                if n not in source_names:
                    raise SchemaError(f"unknown source column {name!r}; the columns are "
                                      f"{', '.join(source.column_names)}")
                return source.column(source_names[n])
            if not q and n in source_names and n in target_names:
                raise ValidationError(
                    f"column {name!r} is ambiguous in MERGE: write {self.target_alias}.{name} or "
                    f"{self.source_alias}.{name}"
                )
            raise SchemaError(f"unknown column {qualifier + '.' if qualifier else ''}{name} in MERGE")

        return ArrowEvaluator(resolve, source.num_rows)

    def apply_matched(self, target: pa.Table, source: pa.Table) -> tuple[np.ndarray, pa.Table | None, int, int]:
        """Which pairs a clause acted on, the updated rows, and the update and delete counts."""
        evaluator = self._evaluator(target, source)
        remaining = np.ones(target.num_rows, dtype=bool)
        acted = np.zeros(target.num_rows, dtype=bool)
        replacements: list[pa.Table] = []
        updated = deleted = 0
        for clause in self.plan.clauses_matched:
            mask = remaining.copy()
            if clause.condition is not None:
                mask &= evaluator.mask(parse_expression(clause.condition)).to_numpy(zero_copy_only=False)
            remaining &= ~mask
            acted |= mask
            if clause.kind == "delete":
                deleted += int(mask.sum())
                continue
            rows = self._whole_rows(target.filter(pa.array(mask)))
            sub = self._evaluator(rows, source.filter(pa.array(mask)))
            values = {name: sub.array(parse_expression(sql)) for name, sql in self._assignments(clause, target)}
            replacements.append(updated_rows(rows, values, self.ctx.schema))
            updated += rows.num_rows
        replacement = pa.concat_tables(replacements) if replacements else None
        return acted, replacement, updated, deleted

    def _whole_rows(self, rows: pa.Table) -> pa.Table:
        """Rows in the full table schema: columns not read (all of them reassigned) as nulls."""
        arrow_schema = self.ctx.file_schema.as_arrow()  # updated rows keep their _row_id on v3
        if rows.column_names == arrow_schema.names:
            return rows
        columns = [rows.column(f.name) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
                   for f in arrow_schema]
        return pa.Table.from_arrays(columns, schema=pa.schema([f.with_nullable(True) for f in arrow_schema]))

    def _assignments(self, clause: Clause, target: pa.Table) -> list[tuple[str, str]]:
        if clause.values is not None:
            names = {n.lower(): n for n in self.ctx.schema.column_names}
            out = []
            for name, sql in clause.values:
                if name.lower() not in names:
                    raise SchemaError(f"MERGE sets unknown column {name!r}; the columns are "
                                      f"{', '.join(self.ctx.schema.column_names)}")
                out.append((names[name.lower()], sql))
            return out
        # UPDATE SET *: every target column the source has, by name (identifier columns keep their value).
        source_names = {n.lower() for n in self.source.column_names}
        identifier = {self.ctx.schema.find_column_name(i) for i in self.ctx.schema.identifier_field_ids}
        return [(n, f"{self.source_alias}.`{n}`") for n in self.ctx.schema.column_names
                if n.lower() in source_names and n not in identifier]

    def inserts(self, unmatched: pa.Table) -> pa.Table:
        """The rows the NOT MATCHED clauses insert for the unmatched source rows, in the table schema."""
        schema = self.ctx.schema
        arrow_schema = schema.as_arrow()
        remaining = np.ones(unmatched.num_rows, dtype=bool)
        evaluator = self._evaluator(None, unmatched)
        parts: list[pa.Table] = []
        for clause in self.plan.clauses_not_matched:
            mask = remaining.copy()
            if clause.condition is not None:
                mask &= evaluator.mask(parse_expression(clause.condition)).to_numpy(zero_copy_only=False)
            remaining &= ~mask
            rows = unmatched.filter(pa.array(mask))
            sub = self._evaluator(None, rows)
            if clause.values is None:
                source_names = {n.lower(): n for n in rows.column_names}
                missing = [n for n in schema.column_names if n.lower() not in source_names]
                if missing:
                    raise SchemaError(f"INSERT * needs every target column in the source; missing: "
                                      f"{', '.join(missing)}")
                values = {n: rows.column(source_names[n.lower()]) for n in schema.column_names}
            else:
                names = {n.lower(): n for n in schema.column_names}
                values = {}
                for name, sql in clause.values:
                    if name.lower() not in names:
                        raise SchemaError(f"MERGE inserts unknown column {name!r}; the columns are "
                                          f"{', '.join(schema.column_names)}")
                    values[names[name.lower()]] = sub.array(parse_expression(sql))
            base = pa.table({f.name: pa.nulls(rows.num_rows, f.type) for f in arrow_schema})
            parts.append(updated_rows(base, values, schema))
        if not parts:
            return arrow_schema.empty_table()
        return conform_to_schema(pa.concat_tables(parts), schema, downcast_ns_requested(self.ctx.properties))
