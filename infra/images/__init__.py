"""Local builds of the stack's images that cannot be pulled on this machine.

A user's machine pulls every image of ``docker-compose.yml``. These machines reach no image
registry, only package registries, so ``make images`` builds the missing ones under their
official tags from what those registries publish. Each builder is a module of this package
that exposes ``BUILD: ImageBuild``; ``BUILDERS`` lists the modules in the order they run.
"""

from __future__ import annotations

import importlib
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

# Module names of this package, each with a ``BUILD``; issues 30 (Trino) and 31 (MinIO) add theirs.
BUILDERS: tuple[str, ...] = ("minio", "trino", "keycloak")


@dataclass(frozen=True)
class ImageBuild:
    """One image: the official tag it is built under, and how to build it."""

    tag: str
    build: Callable[[], None]
    # True when the local image with ``tag`` is already the real thing (not a stand-in), so
    # nothing needs building.
    is_current: Callable[[], bool]


def image_exists(tag: str) -> bool:
    done = subprocess.run(["docker", "image", "inspect", tag], capture_output=True)
    return done.returncode == 0


def builds() -> list[ImageBuild]:
    return [importlib.import_module(f"{__name__}.{name}").BUILD for name in BUILDERS]


def ensure_images() -> list[str]:
    """Build each image of ``BUILDERS`` that is not current; answer the tags built."""
    built = []
    for image in builds():
        if image.is_current():
            print(f"{image.tag}: up to date")
            continue
        print(f"{image.tag}: building")
        image.build()
        built.append(image.tag)
    return built
