"""`python -m bench [name ...]`: run the benchmarks (all by default), one after another."""
from __future__ import annotations

import importlib
import logging
import sys

BENCHMARKS = ("generate", "preprocess", "train", "serving", "demo")


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    names = argv or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        sys.stderr.write(f"unknown benchmark(s) {unknown}; choose from {BENCHMARKS}\n")
        return 2
    for name in names:
        try:
            module = importlib.import_module(f"bench.{name}")
        except ModuleNotFoundError as err:
            logging.warning("skipping %s: %s", name, err)
            continue
        module.main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
