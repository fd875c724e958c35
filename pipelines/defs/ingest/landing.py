"""Synthetic shop events, as a source system would drop them: Hive-style Parquet per day.

The data is a pure function of the settings (seed, day, scale), so writing a landing day again
gives the same rows, and a file whose bytes would not change is left alone.
"""

from __future__ import annotations

import datetime
import io
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.settings import PipelineSettings

COUNTRIES = ["DE", "FR", "NL", "ES", "IT", "PL", "SE", "US", "GB", "BR"]
COUNTRY_WEIGHTS = [0.22, 0.16, 0.08, 0.1, 0.09, 0.07, 0.05, 0.13, 0.07, 0.03]
EVENT_TYPES = ["view", "add_to_cart", "purchase", "refund"]
EVENT_WEIGHTS = [0.62, 0.22, 0.14, 0.02]
DEVICES = ["ios", "android", "web"]
FIRST_NAMES = ["anna", "ben", "chloe", "david", "emma", "felix", "greta", "hugo", "ines", "jonas", "karla", "leo"]
DOMAINS = ["example.com", "mail.example", "shop.example"]
PRICES = [4.99, 9.5, 12.0, 19.99, 24.5, 49.0, 79.9, 129.0]

LANDING_SCHEMA = pa.schema([
    ("event_id", pa.int64()),
    ("event_ts", pa.timestamp("us")),
    ("user_id", pa.int64()),
    ("email", pa.string()),
    ("country", pa.string()),
    ("event_type", pa.string()),
    ("quantity", pa.int32()),
    ("price", pa.float32()),
    ("amount", pa.decimal128(10, 2)),
])
# From the evolution date on, the source system also sends the device.
EVOLVED_LANDING_SCHEMA = LANDING_SCHEMA.append(pa.field("device", pa.string()))


def email_of(user_id: int) -> str:
    return f"{FIRST_NAMES[user_id % len(FIRST_NAMES)]}.{user_id}@{DOMAINS[user_id % len(DOMAINS)]}"


def country_of(user_id: int, seed: int) -> str:
    """A user's home country: fixed per user, so the customers dimension has one value."""
    rng = np.random.default_rng([seed, user_id])
    return str(rng.choice(COUNTRIES, p=COUNTRY_WEIGHTS))


def events_for_day(settings: PipelineSettings, day: datetime.date) -> pa.Table:
    """The landing events of one day, sorted by time. Event ids are unique across days."""
    data = settings.data
    n = data.events_per_day
    rng = np.random.default_rng([data.seed, day.toordinal()])
    seconds = np.sort(rng.integers(0, 86_400, size=n))
    midnight = datetime.datetime(day.year, day.month, day.day)
    users = rng.integers(1, data.users + 1, size=n)
    types = rng.choice(EVENT_TYPES, size=n, p=EVENT_WEIGHTS)
    quantity = rng.integers(1, 6, size=n).astype(np.int32)
    price = rng.choice(PRICES, size=n).astype(np.float32)
    day_index = (day - data.start).days
    countries = {int(u): country_of(int(u), data.seed) for u in np.unique(users)}
    columns: dict[str, pa.Array] = {
        "event_id": pa.array(day_index * 10_000_000 + np.arange(1, n + 1), pa.int64()),
        "event_ts": pa.array([midnight + datetime.timedelta(seconds=int(s)) for s in seconds], pa.timestamp("us")),
        "user_id": pa.array(users, pa.int64()),
        "email": pa.array([email_of(int(u)) for u in users]),
        "country": pa.array([countries[int(u)] for u in users]),
        "event_type": pa.array(types.tolist()),
        "quantity": pa.array(quantity, pa.int32()),
        "price": pa.array(price, pa.float32()),
        # The amount is computed from the float32 price as the source system would store it.
        "amount": pa.array(
            [Decimal(f"{float(q) * float(p):.2f}") for q, p in zip(quantity, price, strict=True)], pa.decimal128(10, 2)
        ),
    }
    schema = LANDING_SCHEMA
    if day >= settings.evolution.at:
        columns["device"] = pa.array(rng.choice(DEVICES, size=n).tolist())
        schema = EVOLVED_LANDING_SCHEMA
    return pa.table(columns, schema=schema)


def day_directory(settings: PipelineSettings, day: datetime.date) -> Path:
    return settings.events_landing / f"dt={day.isoformat()}"


def write_if_changed(path: Path, payload: bytes) -> bool:
    """Write ``payload`` unless the file already holds exactly it; True if written."""
    if path.exists() and path.read_bytes() == payload:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(payload)
    tmp.replace(path)
    return True


def landing_parquet(table: pa.Table) -> bytes:
    """The bytes of a landing file of ``table``, encoded as the shop drops them (zstd Parquet)."""
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    return buffer.getvalue()


def landing_day_file(settings: PipelineSettings, day: datetime.date) -> tuple[bytes, int]:
    """One landing day as the shop drops it: its Parquet file's bytes, and its rows."""
    table = events_for_day(settings, day)
    return landing_parquet(table), table.num_rows


def write_landing_day(settings: PipelineSettings, day: datetime.date) -> tuple[Path, int, bool]:
    """Write one landing day; returns (file, rows, whether the file changed)."""
    payload, rows = landing_day_file(settings, day)
    path = day_directory(settings, day) / "part-00000.parquet"
    return path, rows, write_if_changed(path, payload)


def erasure_requests_file(settings: PipelineSettings) -> bytes:
    """The privacy desk's export of the settings' requests: one JSON object per request and line."""
    lines = [
        json.dumps({"request_id": f"gdpr-{settings.data.start.isoformat()}-{user}", "user_id": user,
                    "requested_at": f"{settings.rollover.cutover.isoformat()}T09:00:00"})
        for user in settings.erasure.requested_users
    ]
    return ("\n".join(lines) + "\n").encode()


def write_erasure_requests(settings: PipelineSettings) -> tuple[Path, bool]:
    """The requests file, as a privacy desk would export it: one JSON object per line."""
    path = settings.requests_landing / "requests.jsonl"
    return path, write_if_changed(path, erasure_requests_file(settings))
