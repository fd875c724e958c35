"""Reading a manifest with a partition filter: entries of rejected partitions are stepped over
undecoded, and the result equals filtering the fully decoded entries."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tablestore.errors import CorruptMetadataError
from tablestore.spec.manifests.manifest import ManifestEntry, ManifestEntryStatus, read_manifest, write_manifest
from tests.spec.manifests.manifest_fixtures import P1, P2, P3, SCHEMA, SPEC, LocalIO, sample_file


def _entries(n: int) -> list[ManifestEntry]:
    partitions = [P1, P2, P3]
    out = []
    for i in range(n):
        p = partitions[i % 3]
        extra: dict[str, Any] = {}
        if i % 4 == 0:
            extra = {"lower_bounds": None, "split_offsets": None, "nan_value_counts": None}
        elif i % 4 == 1:
            extra = {"column_sizes": {k: k * 1000 + i for k in range(1, 11)},
                     "equality_ids": [1, 4], "key_metadata": b"\x01" * (i % 7)}
        status = (ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING, ManifestEntryStatus.DELETED)[i % 3]
        snapshot = None if status is ManifestEntryStatus.ADDED else 1000 + i
        seq = None if status is ManifestEntryStatus.ADDED else i
        out.append(ManifestEntry(status, snapshot, seq, seq, sample_file(i, p, **extra)))
    return out


def _key(entry: ManifestEntry) -> tuple[Any, ...]:
    df = entry.data_file
    partition = tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in df.partition)
    return (entry.status, entry.snapshot_id, entry.sequence_number, df.file_path, partition, df.record_count,
            df.column_sizes, df.lower_bounds, df.upper_bounds, df.split_offsets, df.equality_ids, df.key_metadata)


@pytest.mark.parametrize("predicate", [
    lambda p: p[2] == "zz",
    lambda p: p[0] is None,
    lambda p: p[5] is True,
    lambda p: False,
    lambda p: True,
], ids=["one-partition", "nulls", "bool", "none", "all"])
def test_a_filtered_read_equals_filtering_every_decoded_entry(tmp_path: Path, predicate: Any) -> None:
    io = LocalIO()
    manifest = write_manifest(io, str(tmp_path / "m.avro"), SPEC, SCHEMA, 7, _entries(900))
    everything = read_manifest(io, manifest)
    expected = [_key(e) for e in everything if predicate(e.data_file.partition)]
    assert [_key(e) for e in read_manifest(io, manifest, partition_filter=predicate)] == expected


def test_the_predicate_runs_once_per_distinct_partition(tmp_path: Path) -> None:
    io = LocalIO()
    manifest = write_manifest(io, str(tmp_path / "m.avro"), SPEC, SCHEMA, 7, _entries(600))
    seen: list[tuple[Any, ...]] = []

    def predicate(p: tuple[Any, ...]) -> bool:
        seen.append(p)
        return p[2] == "ab"

    kept = read_manifest(io, manifest, partition_filter=predicate)
    assert len(kept) == 200
    # P2's NaN is unequal to itself, so its verdict cannot be cached; the others are asked once.
    assert len([p for p in seen if p[4] == p[4]]) == 2


def test_a_truncated_manifest_fails_as_corrupt_with_a_filter(tmp_path: Path) -> None:
    io = LocalIO()
    path = tmp_path / "m.avro"
    manifest = write_manifest(io, str(path), SPEC, SCHEMA, 7, _entries(50))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])
    with pytest.raises(CorruptMetadataError):
        read_manifest(io, manifest, partition_filter=lambda p: False)


def _wide(i: int) -> dict[str, Any]:
    """Stats past the skip patterns' bounds (more than 16 map items, bounds longer than 16 bytes)
    on every other entry, so both the regular-expression and the Python skip run."""
    if i % 2:
        return {}
    return {"column_sizes": {k: k + i for k in range(1, 41)}, "value_counts": {k: 10 for k in range(1, 20)},
            "lower_bounds": {1: b"x" * 100, 4: b"a" * (i % 40)}, "key_metadata": b"k" * 70,
            "split_offsets": list(range(0, 4000, 100))}


@pytest.mark.parametrize("entries", [300, 1500], ids=["mixed", "past-the-miss-limit"])
def test_values_past_the_skip_patterns_bounds_are_stepped_over_in_python(tmp_path: Path, entries: int) -> None:
    io = LocalIO()
    partitions = [P1, P2, P3]
    written = [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, sample_file(i, partitions[i % 3], **_wide(i)))
               for i in range(entries)]
    manifest = write_manifest(io, str(tmp_path / "m.avro"), SPEC, SCHEMA, 7, written)
    everything = read_manifest(io, manifest)
    for predicate in (lambda p: p[2] == "zz", lambda p: p[0] is None, lambda p: False):
        expected = [_key(e) for e in everything if predicate(e.data_file.partition)]
        assert expected or predicate(P1) is False
        assert [_key(e) for e in read_manifest(io, manifest, partition_filter=predicate)] == expected
