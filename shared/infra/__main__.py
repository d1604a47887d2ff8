"""``python -m shared.infra up|down|status [--purge]``: the infrastructure commands without the CLI."""

from __future__ import annotations

import argparse
import json
import sys

from shared.config import Settings
from shared.infra import InfraError, down, status, up


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.infra")
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--purge", action="store_true", help="with down: delete the data too")
    args = parser.parse_args(argv)
    settings = Settings()
    try:
        if args.command == "up":
            print(up(settings).model_dump_json(indent=2))
        elif args.command == "down":
            down(settings, purge=args.purge)
        else:
            print(json.dumps(status(settings), indent=2))
    except InfraError as error:
        print(f"infra: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
