"""Create the stack's buckets with the ``minio`` SDK (the ``storage-init`` service).

Idempotent: an existing bucket is left as it is, so ``make up`` can run again.

    python -m infra.storage_init --endpoint minio:9000 --bucket lakehouse
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from minio import Minio

DEFAULT_BUCKETS = ("lakehouse",)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", default="minio:9000", help="host:port of the S3 server")
    parser.add_argument("--bucket", action="append", dest="buckets", help="bucket to create (repeatable)")
    parser.add_argument("--secure", action="store_true", help="use HTTPS")
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
