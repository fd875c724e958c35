"""The pure schema evolution rules: every change on a Schema, ids kept, limits enforced."""

from __future__ import annotations

import pytest

from tablestore.errors import SchemaEvolutionError
from tablestore.spec.metadata.schema_evolution import (
    CastMode,
    SchemaEvolution,
    TypeChange,
    classify_type_change,
    is_narrowing,
)
from tablestore.spec.partitioning.partition_spec import build_partition_spec
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)


def base() -> Schema:
    return Schema((
        NestedField(1, "id", LongType(), True),
        NestedField(2, "name", StringType()),
        NestedField(3, "point", StructType(NestedField(4, "x", IntegerType()), NestedField(5, "y", IntegerType()))),
        NestedField(6, "tags", ListType(7, StructType(NestedField(8, "k", StringType())))),
    ), 0, (1,))


def evolve(spec_terms: list[str] | None = None, mode: CastMode = CastMode.IMPLICIT) -> SchemaEvolution:
    schema = base()
    spec = build_partition_spec(schema, spec_terms) if spec_terms else None
    return SchemaEvolution(schema, 8, spec, mode)


def layout(schema: Schema) -> list[tuple[str, int, str]]:
    return [(name, f.field_id, str(f.field_type)) for name, f in schema.all_fields()]


def test_add_column_gets_a_fresh_id_and_lands_where_asked() -> None:
    e = evolve()
    assert e.add_column("c", "string", doc="hello") == 9
    assert e.add_column("first", IntegerType(), first=True) == 10
    assert e.add_column("after_id", "date", after="id") == 11
    assert [f.name for f in e.schema.fields] == ["first", "id", "after_id", "name", "point", "tags", "c"]
    assert e.schema.find_field("c").doc == "hello"
    assert not e.schema.find_field("c").required


def test_add_nested_fields_by_dotted_name_into_structs_and_list_elements() -> None:
    e = evolve()
    e.add_column("point.z", "double", after="x")
    e.add_column("tags.v", "int")
    e.add_column("tags.element.w", "int")
    e.add_column(("point", "m"), "map<string, int>")
    point = e.schema.find_field("point").field_type
    assert isinstance(point, StructType)
    assert [f.name for f in point.fields] == ["x", "z", "y", "m"]
    assert e.schema.find_field("tags.element.v").field_id == 10
    assert e.schema.find_field("tags.element.w").field_id == 11
    # the map's key and value get fresh ids above every id assigned so far
    assert {f.field_id for _, f in e.schema.all_fields()} == set(range(1, 15))


def test_drop_rename_move_and_doc_keep_field_ids() -> None:
    e = evolve()
    e.drop_column("name")
    e.rename_column("point.x", "xx")
    e.move("tags", first=True)
    e.move("point.y", before="xx")
    e.update_doc("point", "a point")
    assert layout(e.schema)[:6] == [
        ("tags", 6, "list<struct<k: string>>"), ("tags.element", 7, "struct<k: string>"),
        ("tags.element.k", 8, "string"), ("id", 1, "long"),
        ("point", 3, "struct<y: int, xx: int>"), ("point.y", 5, "int"),
    ]
    assert e.schema.find_field("point").doc == "a point"


def test_drop_then_add_same_name_gets_a_new_id() -> None:
    e = evolve()
    e.drop_column("name")
    assert e.add_column("name", "string") == 9


def test_promotions_are_metadata_only_and_conversions_need_a_rewrite() -> None:
    e = evolve()
    assert e.update_column_type("point.x", "bigint") is TypeChange.PROMOTION
    assert e.rewrites() == []
    assert e.update_column_type("name", "string") is TypeChange.NONE
    e.add_column("n", "int")
    e.add_column("d", "date")
    # columns added in the same change hold no data: nothing to rewrite
    assert e.update_column_type("n", "double") is TypeChange.REWRITE
    assert e.rewrites() == []


@pytest.mark.parametrize(("old", "new", "cost"), [
    (IntegerType(), LongType(), TypeChange.PROMOTION),
    (FloatType(), DoubleType(), TypeChange.PROMOTION),
    (DecimalType(9, 2), DecimalType(18, 2), TypeChange.PROMOTION),
    (IntegerType(), DoubleType(), TypeChange.REWRITE),
    (LongType(), DoubleType(), TypeChange.REWRITE),
    (DateType(), TimestampType(), TypeChange.REWRITE),
    (DateType(), TimestamptzType(), TypeChange.REWRITE),
    (BooleanType(), StringType(), TypeChange.REWRITE),
    (DecimalType(9, 2), StringType(), TypeChange.REWRITE),
    (StringType(), StringType(), TypeChange.NONE),
])
def test_type_change_costs_in_implicit_mode(old: object, new: object, cost: TypeChange) -> None:
    assert classify_type_change("c", old, new, CastMode.IMPLICIT) is cost  # type: ignore[arg-type]


@pytest.mark.parametrize(("old", "new"), [
    (LongType(), IntegerType()), (DoubleType(), FloatType()), (DoubleType(), LongType()),
    (DecimalType(18, 2), DecimalType(9, 2)), (DecimalType(9, 2), DecimalType(9, 1)), (TimestampType(), DateType()),
])
def test_narrowing_is_refused_in_every_mode(old: object, new: object) -> None:
    assert is_narrowing(old, new)  # type: ignore[arg-type]
    for mode in CastMode:
        with pytest.raises(SchemaEvolutionError, match="narrows"):
            classify_type_change("c", old, new, mode)  # type: ignore[arg-type]


def test_explicit_casts_need_a_cast_mode() -> None:
    with pytest.raises(SchemaEvolutionError, match="tablestore.schema.cast-mode"):
        classify_type_change("c", StringType(), IntegerType(), CastMode.IMPLICIT)
    assert classify_type_change("c", StringType(), IntegerType(), CastMode.STRICT) is TypeChange.REWRITE
    assert classify_type_change("c", StringType(), DateType(), CastMode.NULL_ON_ERROR) is TypeChange.REWRITE
    with pytest.raises(SchemaEvolutionError, match="add a new column"):
        classify_type_change("c", BinaryType(), IntegerType(), CastMode.STRICT)


def test_cast_mode_property_is_validated() -> None:
    assert CastMode.from_properties({}) is CastMode.IMPLICIT
    assert CastMode.from_properties({"tablestore.schema.cast-mode": "Null-On-Error"}) is CastMode.NULL_ON_ERROR
    with pytest.raises(SchemaEvolutionError, match="implicit, strict, null-on-error"):
        CastMode.from_properties({"tablestore.schema.cast-mode": "loose"})


@pytest.mark.parametrize(("change", "message"), [
    (lambda e: e.add_column("c", "int", required=True), "NOT NULL"),
    (lambda e: e.drop_column("id"), "identifier"),
    (lambda e: e.rename_column("id", "key"), "identifier"),
    (lambda e: e.make_optional("id"), "identifier"),
    (lambda e: e.drop_column("name"), "partition field 'name'"),
    (lambda e: e.update_column_type("name", "int"), "cast-mode|narrow"),
    (lambda e: e.drop_column("point"), "partition field 'x_bucket'|partition field"),
    (lambda e: e.update_column_type("point.x", "bigint"), "partition field"),
    (lambda e: e.add_column("NAME", "int"), "exists already"),
    (lambda e: e.add_column("point.Y", "int"), "exists already"),
    (lambda e: e.rename_column("point.x", "y"), "exists already"),
    (lambda e: e.add_column("", "int"), "empty"),
    (lambda e: e.rename_column("name", " "), "empty"),
    (lambda e: e.add_column("nope.z", "int"), "does not exist"),
    (lambda e: e.add_column("name.z", "int"), "not a struct"),
    (lambda e: e.move("point.x", after="id"), "same struct"),
    (lambda e: e.update_column_type("point", "string"), "only primitive"),
    (lambda e: e.set_identifier_fields(["name"]), "nullable"),
    (lambda e: e.drop_identifier_fields(["name"]), "not an identifier"),
])
def test_limits(change: object, message: str) -> None:
    e = evolve(["name", "bucket(4, point.x)"])
    with pytest.raises(SchemaEvolutionError, match=message):
        change(e)  # type: ignore[operator]
    assert e.schema == base()


def test_renaming_a_partition_source_is_allowed() -> None:
    e = evolve(["name"])
    e.rename_column("name", "label")
    assert e.result().find_field(2).name == "label"


def test_dropping_the_last_column_or_struct_field_is_refused() -> None:
    e = SchemaEvolution(Schema((NestedField(1, "a", IntegerType()),)), 1)
    with pytest.raises(SchemaEvolutionError, match="last column"):
        e.drop_column("a")
    e = evolve()
    e.drop_column("point.x")
    with pytest.raises(SchemaEvolutionError, match="last field of struct"):
        e.drop_column("point.y")


def test_identifier_fields_set_and_drop() -> None:
    e = evolve()
    e.add_column("k", "string")
    with pytest.raises(SchemaEvolutionError, match="nullable"):
        e.set_identifier_fields(["k"])
    e.drop_identifier_fields(["id"])
    assert e.schema.identifier_field_ids == ()
    e.drop_column("id")  # no longer a key: may go
    assert "id" not in e.schema.column_names


def test_case_insensitive_lookup_for_sql() -> None:
    e = SchemaEvolution(base(), 8, case_sensitive=False)
    e.rename_column("NAME", "Label")
    e.move("POINT.Y", first=True)
    assert e.schema.find_field(2).name == "Label"
    assert [f.name for f in e.schema.find_field(3).field_type.fields] == ["y", "x"]  # type: ignore[attr-defined]


def test_sort_order_columns_cannot_be_dropped_but_may_take_promotions() -> None:
    from tablestore.spec.partitioning.sort_order import build_sort_order

    schema = base()
    e = SchemaEvolution(schema, 8, sort_orders=(build_sort_order(schema, ["bucket(4, point.x)", "name"]),))
    with pytest.raises(SchemaEvolutionError, match="sort order"):
        e.drop_column("point.x")
    with pytest.raises(SchemaEvolutionError, match="sort order"):
        e.drop_column("point")
    with pytest.raises(SchemaEvolutionError, match="sort order"):
        e.update_column_type("point.x", "double")
    assert e.update_column_type("point.x", "bigint") is TypeChange.PROMOTION
    e.rename_column("name", "label")
    assert e.result().find_field(2).name == "label"


def test_a_column_may_not_take_the_name_of_a_partition_field() -> None:
    schema = base()
    spec = build_partition_spec(schema, ["name", "bucket(4, id)"])
    e = SchemaEvolution(schema, 8, spec, specs=(spec,))
    with pytest.raises(SchemaEvolutionError, match="partition field named 'id_bucket'"):
        e.add_column("ID_BUCKET", "int")
    e.rename_column("name", "label")
    with pytest.raises(SchemaEvolutionError, match="partition field named 'name'"):
        e.add_column("name", "string")
    e.rename_column("label", "name")  # the identity field's own source may take its name back
    e.add_column("point.name", "string")  # nested names do not clash
    assert e.schema.find_field("name").field_id == 2
