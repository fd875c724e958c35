"""``make images``: build each image of ``infra.images.BUILDERS`` that is not already current."""

from __future__ import annotations

import sys

from infra.compose_stack import ensure_engine
from infra.images import ensure_images


def main() -> int:
    ensure_engine()
    ensure_images()
    return 0


if __name__ == "__main__":
    sys.exit(main())
