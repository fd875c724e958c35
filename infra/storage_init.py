"""Create the stack's buckets and MinIO users, and Dagster's database (the ``storage-init`` service).

The one service given MinIO's root credentials. With them it creates the buckets and, through
MinIO's admin API (the ``minio`` SDK's ``MinioAdmin``), the catalog's MinIO user
(``MINIO_CATALOG_USER``: read and write on the buckets, nothing else). With
``--landing-bucket`` it creates the bucket where sources drop their files and the landing
reader (``MINIO_LANDING_USER``: list and read of that bucket, nothing else), the key of the
pipeline's sensors; the catalog's user has no access to it. With
``--dagster-database`` it creates that PostgreSQL database and the tables of Dagster's instance.

Idempotent: existing buckets, users and the database are kept (a user's secret and policy are
set again), so ``make up`` can run again.

    python -m infra.storage_init --endpoint minio:9000 --bucket lakehouse --dagster-database dagster
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any

from minio import Minio, MinioAdmin
from minio.credentials import StaticProvider

DEFAULT_BUCKETS = ("lakehouse",)
CATALOG_POLICY = "lakehouse-catalog"
LANDING_POLICY = "lakehouse-landing-reader"


def create_buckets(endpoint: str, access_key: str, secret_key: str, buckets: tuple[str, ...] = DEFAULT_BUCKETS,
                   secure: bool = False, region: str = "us-east-1", timeout_s: float = 60.0) -> list[str]:
    """Create each missing bucket; answer the names created (existing ones are skipped).

    ``endpoint`` is ``host:port`` as the SDK wants it (no scheme). Retries until the server
    answers or ``timeout_s`` passes: the server may still be starting.
    """
    client = Minio(endpoint, access_key=access_key, secret_key=secret_key, secure=secure, region=region)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            created = []
            for bucket in buckets:
                if not client.bucket_exists(bucket):
                    client.make_bucket(bucket)
                    created.append(bucket)
            return created
        except Exception as e:  # connection refused while the server starts
            if time.monotonic() > deadline:
                raise RuntimeError(f"cannot create buckets {list(buckets)} on {endpoint}: {e}") from e
            time.sleep(1.0)


def admin_client(endpoint: str, access_key: str, secret_key: str, secure: bool = False) -> MinioAdmin:
    """MinIO's admin API (users, policies) at ``host:port``, as the root user."""
    return MinioAdmin(endpoint=endpoint, credentials=StaticProvider(access_key, secret_key), secure=secure)


def bucket_policy(buckets: Iterable[str], write: bool = True) -> dict[str, Any]:
    """An IAM policy allowing the objects of ``buckets`` (read, and with ``write`` write and
    delete) and their listing; nothing else: no other bucket, no bucket creation, no admin."""
    names = list(buckets)
    objects = [f"arn:aws:s3:::{name}/*" for name in names]
    object_actions = ["s3:GetObject", "s3:GetObjectVersion"]
    if write:
        object_actions += ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                           "s3:ListMultipartUploadParts"]
    return {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"],
         "Resource": [f"arn:aws:s3:::{name}" for name in names]},
        {"Effect": "Allow", "Action": object_actions, "Resource": objects},
    ]}


def ensure_user(admin: MinioAdmin, access_key: str, secret_key: str, policy_name: str,
                policy: Mapping[str, Any]) -> None:
    """Create (or update) the user ``access_key`` with ``policy`` as its only policy.

    Idempotent: a second run sets the same secret and policy again.
    """
    admin.policy_add(policy_name, policy=dict(policy))
    admin.user_add(access_key, secret_key)
    admin.policy_set(policy_name, user=access_key)


def create_database(host: str, user: str, password: str, database: str, port: int = 5432,
                    timeout_s: float = 60.0) -> bool:
    """``CREATE DATABASE`` unless it exists (PostgreSQL has no IF NOT EXISTS for it); answer
    whether it was created."""
    import psycopg2
    from psycopg2 import sql

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn = psycopg2.connect(host=host, port=port, user=user, password=password, dbname="postgres")
            break
        except psycopg2.OperationalError as e:  # the server may still be starting
            if time.monotonic() > deadline:
                raise RuntimeError(f"cannot reach PostgreSQL at {host}:{port} as {user}: {e}") from e
            time.sleep(1.0)
    try:
        conn.autocommit = True  # CREATE DATABASE cannot run inside a transaction
        with conn.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
            if cursor.fetchone():
                return False
            cursor.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
            return True
    finally:
        conn.close()


def init_dagster_instance() -> None:
    """Create the tables of Dagster's instance ($DAGSTER_HOME/dagster.yaml) once, here, so that
    the code server, the webserver and the daemon do not race to create them."""
    from dagster import DagsterInstance

    instance = DagsterInstance.get()
    instance.dispose()


def _minio_user(role: str) -> tuple[str, str] | None:
    """A MinIO user and secret (``MINIO_<ROLE>_USER``, ``..._PASSWORD``), when both are set."""
    user, secret = os.environ.get(f"MINIO_{role}_USER"), os.environ.get(f"MINIO_{role}_PASSWORD")
    return (user, secret) if user and secret else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", default="minio:9000", help="host:port of the S3 server")
    parser.add_argument("--bucket", action="append", dest="buckets", help="bucket to create (repeatable)")
    parser.add_argument("--landing-bucket", help="bucket where sources land files; its reader is MINIO_LANDING_USER")
    parser.add_argument("--secure", action="store_true", help="use HTTPS")
    parser.add_argument("--dagster-database", help="PostgreSQL database of Dagster's instance, created if missing")
    parser.add_argument("--postgres-host", default="postgres")
    parser.add_argument("--postgres-user", default="lakehouse")
    args = parser.parse_args(argv)
    access_key = os.environ.get("MINIO_ROOT_USER")
    secret_key = os.environ.get("MINIO_ROOT_PASSWORD")
    if not access_key or not secret_key:
        print("storage-init: set MINIO_ROOT_USER and MINIO_ROOT_PASSWORD (see infra/.env.example)", file=sys.stderr)
        return 2
    buckets = tuple(args.buckets or DEFAULT_BUCKETS)
    created = create_buckets(args.endpoint, access_key, secret_key, buckets, secure=args.secure)
    for bucket in buckets:
        print(f"storage-init: bucket {bucket} {'created' if bucket in created else 'exists'}")
    catalog = _minio_user("CATALOG")
    if catalog:
        admin = admin_client(args.endpoint, access_key, secret_key, secure=args.secure)
        ensure_user(admin, *catalog, CATALOG_POLICY, bucket_policy(buckets))
        print(f"storage-init: MinIO user {catalog[0]} with policy {CATALOG_POLICY} ({', '.join(buckets)} only)")
    if args.landing_bucket:
        reader = _minio_user("LANDING")
        if reader is None:
            print("storage-init: --landing-bucket needs MINIO_LANDING_USER and MINIO_LANDING_PASSWORD "
                  "(see infra/.env.example)", file=sys.stderr)
            return 2
        landing = create_buckets(args.endpoint, access_key, secret_key, (args.landing_bucket,), secure=args.secure)
        print(f"storage-init: bucket {args.landing_bucket} {'created' if landing else 'exists'}")
        admin = admin_client(args.endpoint, access_key, secret_key, secure=args.secure)
        ensure_user(admin, *reader, LANDING_POLICY, bucket_policy([args.landing_bucket], write=False))
        print(f"storage-init: MinIO user {reader[0]} with policy {LANDING_POLICY} "
              f"(list and read of {args.landing_bucket} only)")
    if args.dagster_database:
        password = os.environ.get("POSTGRES_PASSWORD")
        if not password:
            print("storage-init: set POSTGRES_PASSWORD (see infra/.env.example)", file=sys.stderr)
            return 2
        made = create_database(args.postgres_host, args.postgres_user, password, args.dagster_database)
        print(f"storage-init: database {args.dagster_database} {'created' if made else 'exists'}")
        init_dagster_instance()
        print("storage-init: Dagster's instance storage is ready")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
