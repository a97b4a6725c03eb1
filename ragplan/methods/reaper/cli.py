"""``ragplan reaper …``: REAPER's tools and data (validate plans, make the shop, training data, the classifier)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The ``reaper`` command and its sub-commands."""
    from ragplan.methods.reaper.cli_classifier import add_classifier_parser
    from ragplan.methods.reaper.cli_datagen import add_datagen_parser
    from ragplan.methods.reaper.cli_shop import add_shop_parser
    from ragplan.methods.reaper.cli_validate import add_validate_parser

    reaper = sub.add_parser("reaper", help="REAPER: validate retrieval plans, make the retail shop, training data",
                            description="REAPER (one-call retrieval plans over a tool registry): tools and data.")
    rsub = reaper.add_subparsers(dest="reaper_command", metavar="SUBCOMMAND", required=True)
    add_validate_parser(rsub)
    add_shop_parser(rsub)
    add_datagen_parser(rsub)
    add_classifier_parser(rsub)


def run(args: argparse.Namespace) -> int:
    """Run the chosen ``reaper`` sub-command."""
    if args.reaper_command == "validate":
        from ragplan.methods.reaper.cli_validate import run_validate

        return run_validate(args)
    if args.reaper_command == "train-classifier":
        from ragplan.methods.reaper.cli_classifier import run_classifier

        return run_classifier(args)
    if args.reaper_command == "datagen":
        from ragplan.methods.reaper.cli_datagen import run_datagen

        return run_datagen(args)
    from ragplan.methods.reaper.cli_shop import run_shop

    return run_shop(args)
