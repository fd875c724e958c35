"""The generated Avro codec is debuggable: tracebacks show its lines, codec_source returns them."""

from __future__ import annotations

import traceback

import pytest

from tablestore.spec.manifests.manifest_codec import (
    codec_source,
    decoder_for,
    encoder_for,
    read_records,
    write_container,
)

SCHEMA = {
    "type": "record",
    "name": "manifest_entry",
    "fields": [
        {"name": "status", "type": "int"},
        {"name": "path", "type": "string"},
        {"name": "partition", "type": {"type": "record", "name": "r102", "fields": [
            {"name": "day", "type": ["null", "int"]}]}},
    ],
}


def test_a_traceback_through_a_generated_decoder_names_it_and_shows_the_failing_line() -> None:
    decode = decoder_for(SCHEMA)
    block = bytearray()
    encoder_for(SCHEMA)(block, {"status": 1, "path": "s3://b/f.parquet", "partition": {"day": 19000}})
    with pytest.raises(IndexError) as caught:
        decode(bytes(block[:-2]), 1)  # cut inside the partition value
    frames = traceback.extract_tb(caught.value.__traceback__)
    generated = frames[-1]
    # The file name names the codec and the record; its hash is of the schema.
    assert generated.filename.startswith("<avro decoder manifest_entry ") and generated.name == "decode"
    source = codec_source(SCHEMA)
    assert source.splitlines()[0] == "def decode(buf, count):"
    # The traceback quotes the generated line that failed, the one codec_source has at that number.
    assert generated.lineno is not None and generated.line == source.splitlines()[generated.lineno - 1].strip()
    assert "buf[pos]" in generated.line
    text = "".join(traceback.format_exception(caught.value))
    assert f'File "{generated.filename}", line {generated.lineno}, in decode\n    {generated.line}\n' in text


def test_codec_source_gives_each_kind_of_generated_function() -> None:
    encoder = codec_source(SCHEMA, "encoder")
    assert encoder.splitlines()[0] == "def encode(out, rec):"
    assert "r1.get('path')" in encoder
    filtered = codec_source(SCHEMA, "filtered", outer="partition", inner="day")
    assert filtered.splitlines()[0] == "def decode(buf, count, keep, verdicts):"
    with pytest.raises(ValueError, match="outer=..., inner="):
        codec_source(SCHEMA, "filtered")
    with pytest.raises(ValueError, match="'decoder', 'encoder' or 'filtered'"):
        codec_source(SCHEMA, "parser")


def test_the_cached_encoder_writes_what_the_decoder_reads() -> None:
    records = [{"status": i % 3, "path": f"f{i}.parquet", "partition": {"day": None if i % 2 else i}}
               for i in range(5)]
    first = write_container(SCHEMA, records, {"format-version": "2"})
    second = write_container(SCHEMA, records[:2], {"format-version": "2"})
    assert read_records(first, SCHEMA, "m1") == records
    assert read_records(second, SCHEMA, "m2") == records[:2]
