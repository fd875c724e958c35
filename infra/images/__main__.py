"""``make images``: build each image of ``infra.images.BUILDERS`` that is not already current."""

from __future__ import annotations

import sys

from infra.compose_stack import ensure_engine
from infra.images import builds


def main() -> int:
    ensure_engine()
    for image in builds():
        if image.is_current():
            print(f"{image.tag}: up to date")
            continue
        print(f"{image.tag}: building")
        image.build()
    return 0


if __name__ == "__main__":
    sys.exit(main())
