"""GX's Data Docs site of the suites: a filesystem site that keeps every validation's page.

Each suite validates in its own ephemeral GX context (``quality.suites.validate``), whose stores
hold that one validation only. GX's index builder removes, by default, every page of the site that
its context's stores do not hold (``skip_and_clean_missing``): each check would delete the pages of
the checks before it, and the links their results carry would lead nowhere. The index builder here
keeps them; the index then lists the latest validation's pages, and the pages accumulate.

GX imports this module by name when it builds the site (the site's ``module_name``), so importing
``quality.suites`` does not import GX.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any

from great_expectations.data_context.store.store import DataDocsSiteConfigTypedDict
from great_expectations.render.renderer.site_builder import DefaultSiteIndexBuilder


class KeepingSiteIndexBuilder(DefaultSiteIndexBuilder):
    """GX's index builder, leaving the pages of earlier validations in place."""

    def build(self, skip_and_clean_missing: bool = False,
              build_index: bool = True) -> tuple[Any, OrderedDict[str, Any] | None]:
        return super().build(skip_and_clean_missing=False, build_index=build_index)


def data_docs_site(directory: Path) -> DataDocsSiteConfigTypedDict:
    """A GX Data Docs site in ``directory`` (what ``great_expectations.yml`` would declare)."""
    return {
        "class_name": "SiteBuilder",
        "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(directory)},
        "site_index_builder": {"module_name": __name__, "class_name": KeepingSiteIndexBuilder.__name__},
    }
