"""``python -m infra.local``: start the topology on loopback, print where it is, stop on Ctrl-C."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

from infra.local.topology import LocalStack


def main() -> int:
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with LocalStack.running() as stack:
        for name, url in stack.urls().items():
            print(f"{name:18} {url}")
        for name, why in stack.skipped.items():
            print(f"{name:18} skipped: {why}")
        print(f"client config      {stack.config_path}  (TABLESTORE_CONFIG)")
        print("Ctrl-C stops every service.", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            done.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
