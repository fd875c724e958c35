"""`make quality`: run the GX suites alone on the lakehouse that `make demo` (or a run) left, and
print GX's result of each. Exits non-zero if any suite fails."""

from __future__ import annotations

import argparse
import sys

from pipelines.defs.resources import resources
from pipelines.settings import CATALOG, DATABASE
from quality.suites import SUITES, Lakehouse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.quality_run", description=__doc__)
    parser.add_argument("--root", default="warehouse/demo", help="the lakehouse root (as given to make demo)")
    parser.add_argument("suites", nargs="*", choices=[[], *SUITES], help="suites to run (default: all)")
    args = parser.parse_args(argv)
    res = resources(root=args.root)
    store = res["tablestore"]
    if not store.exists("events"):
        print(f"no lakehouse.shop.events under {args.root}: run `make demo` first", file=sys.stderr)
        return 2
    lake = Lakehouse(store.settings, store.manager, res["spark"].session(), CATALOG, DATABASE,
                     data_docs=store.settings.data_docs.site)
    failed = []
    for name in args.suites or list(SUITES):
        run = SUITES[name](lake)
        print(f"== {name}: {'passed' if run.success else 'FAILED'}")
        print(run.describe())
        for page in run.data_docs:
            print(f"Data Docs: {page}")
        if not run.success:
            failed.append(name)
    print(f"{len(SUITES) if not args.suites else len(args.suites)} suites, {len(failed)} failed"
          + (f": {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
