"""``exo-rt schema``: the JSON Schema of a config file kind, or the shipped schemas, docs
tables and $schema lines regenerated."""

from __future__ import annotations

import argparse
import sys

from exo_rt.cli.common import Command


def setup(p: argparse.ArgumentParser) -> None:
    from exo_rt.schema import KINDS

    p.add_argument("kind", nargs="?", choices=tuple(KINDS), help="the config file kind")
    p.add_argument("--out", metavar="FILE", help="write the JSON Schema here (default: stdout)")
    p.add_argument("--write", action="store_true",
                   help="regenerate configs/schemas/*.schema.json, the docs' key tables and "
                        "the shipped configs' $schema lines under --root")
    p.add_argument("--root", default=".", metavar="DIR", help="the repository (default: .)")


def handle(args: argparse.Namespace) -> int:
    """The JSON Schema of a config file kind (docs/config.md); --write regenerates the
    shipped schemas, the docs' key tables and the configs' $schema lines."""
    from pathlib import Path

    from exo_rt import schema
    from exo_rt.errors import ConfigError

    if args.write:
        for path in schema.write(Path(args.root)):
            print(f"wrote {path}")
        return 0
    if args.kind is None:
        raise ConfigError("no file kind given", None,
                          f"give one of {', '.join(schema.KINDS)}, or --write")
    text = schema.json_text(args.kind)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


COMMAND = Command("schema", "the JSON Schema of a config file kind", setup, handle)
