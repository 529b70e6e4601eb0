"""``python -m posbench aggregate``: every record under a folder -> CSV/Parquet tables."""

from __future__ import annotations

from pathlib import Path

from posbench.cli import arguments

HELP = "collect every record under --records into tables (cost, accuracy, extrapolation) under --out"


def add_arguments(parser) -> None:
    parser.add_argument("--records", type=arguments.existing_folder, required=True,
                        help="folder searched recursively for *.json records")
    parser.add_argument("--out", type=Path, required=True, help="folder for the tables and meta.json")


def run(args) -> int:
    import sys

    from posbench.aggregate import aggregate, summary

    if not any(args.records.rglob("*.json")):
        print(f"posbench aggregate: error: argument --records: no *.json records under {args.records}; "
              f"nothing written", file=sys.stderr)
        return 1
    if arguments.unwritable("aggregate", "--out", args.out, folder=True):
        return 1
    print(summary(aggregate(args.records, args.out), args.out))
    return 0
