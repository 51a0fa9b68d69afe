"""`python -m pipeline <command>`: generate-data, demo."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = ("generate-data", "demo")
    if not argv or argv[0] not in commands:
        sys.stderr.write(f"usage: python -m pipeline {{{','.join(commands)}}} [options]\n")
        return 2
    command, rest = argv[0], argv[1:]
    if command == "generate-data":
        from pipeline.datagen.cli import main as generate_main

        return generate_main(rest)
    from pipeline.demo import main as demo_main

    return demo_main(rest)


if __name__ == "__main__":
    raise SystemExit(main())
