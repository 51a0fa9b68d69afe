"""`python -m pipeline <command>`: generate-data, import-ratings, replay, demo, config-doc."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = ("generate-data", "import-ratings", "replay", "demo", "config-doc")
    if not argv or argv[0] not in commands:
        sys.stderr.write(f"usage: python -m pipeline {{{','.join(commands)}}} [options]\n")
        return 2
    command, rest = argv[0], argv[1:]
    if command == "generate-data":
        from pipeline.datagen.cli import main as generate_main

        return generate_main(rest)
    if command == "import-ratings":
        from pipeline.datagen.ratings_import import main as import_main

        return import_main(rest)
    if command == "replay":
        from pipeline.replay import main as replay_main

        return replay_main(rest)
    if command == "config-doc":
        from pipeline.config_doc import main as config_doc_main

        return config_doc_main(rest)
    from pipeline.demo import main as demo_main

    return demo_main(rest)


if __name__ == "__main__":
    raise SystemExit(main())
