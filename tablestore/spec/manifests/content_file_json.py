"""Data and delete files as the REST spec's ``ContentFile`` JSON (server-side scan planning).

``{"content": "data"|"position-deletes"|"equality-deletes", "file-path", "file-format",
"spec-id", "partition": [values in the spec's field order], "file-size-in-bytes",
"record-count", ...}``. Partition values and column bounds are the spec's JSON single values of
their types (a ``day`` partition as ``"2024-01-02"``, a string bound as the string); column
statistics are ``{"keys": [field ids], "values": [...]}``.

The service writes them (:func:`content_file_to_json`), tablestore's ``rest`` catalog reads them
back (:func:`content_file_from_json`) into the same :class:`DataFile` its own planner makes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from tablestore.errors import ValidationError
from tablestore.spec.manifests.manifest import DataFile, DataFileContent, FileFormat
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.types import BinaryType, FixedType, IcebergType, StructType

CONTENT_NAMES = {
    DataFileContent.DATA: "data",
    DataFileContent.POSITION_DELETES: "position-deletes",
    DataFileContent.EQUALITY_DELETES: "equality-deletes",
}
CONTENT_BY_NAME = {v: k for k, v in CONTENT_NAMES.items()}


def _json_value(t: IcebergType, value: Any) -> Any:
    out = conversions.to_json_value(t, value)
    return out.upper() if isinstance(t, BinaryType | FixedType) and isinstance(out, str) else out


def _from_json(t: IcebergType, value: Any) -> Any:
    if isinstance(t, BinaryType | FixedType) and isinstance(value, str):
        return bytes.fromhex(value)
    return conversions.from_json_value(t, value)


def _count_map(values: Mapping[int, int] | None, keep: Collection[int] | None) -> dict[str, list[int]] | None:
    if values is None:
        return None
    keys = [k for k in values if keep is None or k in keep]
    return {"keys": keys, "values": [values[k] for k in keys]}


def _bounds_map(values: Mapping[int, bytes] | None, keep: Collection[int] | None,
                types: Mapping[int, IcebergType]) -> dict[str, list[Any]] | None:
    if values is None:
        return None
    keys, out = [], []
    for k, raw in values.items():
        t = types.get(k)
        # A bound of a column no longer in the schema, or of a non-primitive one, has no type here.
        if t is None or (keep is not None and k not in keep):
            continue
        keys.append(k)
        out.append(_json_value(t, conversions.from_bytes(t, raw)))
    return {"keys": keys, "values": out}


def content_file_to_json(
    df: DataFile,
    partition_type: StructType,
    column_types: Mapping[int, IcebergType] | None = None,
    stats_fields: Collection[int] | None = None,
) -> dict[str, Any]:
    """The JSON of one file. Column statistics are written for data files only, and only for
    ``stats_fields`` (field ids; None writes none), whose types come from ``column_types``."""
    obj: dict[str, Any] = {
        "content": CONTENT_NAMES[df.content],
        "file-path": df.file_path,
        "file-format": str(df.file_format.value).lower(),
        "spec-id": df.spec_id,
        "partition": [_json_value(f.field_type, v) for f, v in zip(partition_type.fields, df.partition, strict=False)],
        "file-size-in-bytes": df.file_size_in_bytes,
        "record-count": df.record_count,
    }
    if df.key_metadata is not None:
        obj["key-metadata"] = df.key_metadata.hex().upper()
    if df.split_offsets is not None:
        obj["split-offsets"] = list(df.split_offsets)
    if df.sort_order_id is not None:
        obj["sort-order-id"] = df.sort_order_id
    if df.content == DataFileContent.DATA:
        if df.first_row_id is not None:
            obj["first-row-id"] = df.first_row_id
        if stats_fields:
            keep = set(stats_fields)
            for key, counts in (("column-sizes", df.column_sizes), ("value-counts", df.value_counts),
                                ("null-value-counts", df.null_value_counts),
                                ("nan-value-counts", df.nan_value_counts)):
                value = _count_map(counts, keep)
                if value is not None:
                    obj[key] = value
            for key, bounds in (("lower-bounds", df.lower_bounds), ("upper-bounds", df.upper_bounds)):
                value = _bounds_map(bounds, keep, column_types or {})
                if value is not None:
                    obj[key] = value
    elif df.content == DataFileContent.POSITION_DELETES:
        if df.referenced_data_file is not None:
            obj["referenced-data-file"] = df.referenced_data_file
        if df.content_offset is not None:
            obj["content-offset"] = df.content_offset
        if df.content_size_in_bytes is not None:
            obj["content-size-in-bytes"] = df.content_size_in_bytes
    elif df.equality_ids is not None:
        obj["equality-ids"] = list(df.equality_ids)
    return obj


def _map(obj: Any, key: str) -> dict[int, Any] | None:
    value = obj.get(key)
    if value is None:
        return None
    keys, values = value.get("keys") or [], value.get("values") or []
    if len(keys) != len(values):
        raise ValidationError(f"{key} has {len(keys)} keys but {len(values)} values")
    return {int(k): v for k, v in zip(keys, values, strict=True)}


def content_file_from_json(
    obj: Mapping[str, Any],
    partition_types: Mapping[int, StructType],
    column_types: Mapping[int, IcebergType] | None = None,
) -> DataFile:
    """The DataFile of one file's JSON; ``partition_types`` by spec id."""
    try:
        content = CONTENT_BY_NAME[obj["content"]]
        spec_id = int(obj["spec-id"])
        ptype = partition_types.get(spec_id)
        if ptype is None:
            raise ValidationError(f"file {obj['file-path']} names partition spec {spec_id}, which the table lacks")
        raw_partition: Sequence[Any] = obj.get("partition") or []
        partition = tuple(_from_json(f.field_type, v) for f, v in zip(ptype.fields, raw_partition, strict=False))
        types = column_types or {}

        def bounds(key: str) -> dict[int, bytes] | None:
            values = _map(obj, key)
            if values is None:
                return None
            return {k: conversions.to_bytes(types[k], _from_json(types[k], v)) for k, v in values.items()
                    if k in types}

        key_metadata = obj.get("key-metadata")
        return DataFile(
            content=content,
            file_path=str(obj["file-path"]),
            file_format=FileFormat(str(obj["file-format"]).upper()),
            partition=partition,
            record_count=int(obj["record-count"]),
            file_size_in_bytes=int(obj["file-size-in-bytes"]),
            column_sizes=_map(obj, "column-sizes"),
            value_counts=_map(obj, "value-counts"),
            null_value_counts=_map(obj, "null-value-counts"),
            nan_value_counts=_map(obj, "nan-value-counts"),
            lower_bounds=bounds("lower-bounds"),
            upper_bounds=bounds("upper-bounds"),
            key_metadata=bytes.fromhex(key_metadata) if key_metadata else None,
            split_offsets=obj.get("split-offsets"),
            equality_ids=obj.get("equality-ids"),
            sort_order_id=obj.get("sort-order-id"),
            spec_id=spec_id,
            referenced_data_file=obj.get("referenced-data-file"),
            content_offset=obj.get("content-offset"),
            content_size_in_bytes=obj.get("content-size-in-bytes"),
            first_row_id=obj.get("first-row-id"),
        )
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, ValidationError):
            raise
        raise ValidationError(f"malformed content file in a scan plan: {type(e).__name__}: {e}") from None


__all__ = ["CONTENT_BY_NAME", "CONTENT_NAMES", "content_file_from_json", "content_file_to_json"]
