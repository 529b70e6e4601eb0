"""``python -m posbench aggregate``: every record under a folder -> CSV/Parquet tables, and ``analytic.csv`` (what
the code computes: :mod:`posbench.analytic`); ``--analytic-only`` writes just that, into a tables folder that has
no records behind it (a committed reference)."""

from __future__ import annotations

from pathlib import Path

from posbench.cli import arguments

HELP = ("collect every record under --records into tables (cost, accuracy, extrapolation, ...) under --out, with "
        "analytic.csv (parameters, FLOPs and the claims' numbers, computed from the code)")


def add_arguments(parser) -> None:
    parser.add_argument("--records", type=arguments.existing_folder,
                        help="folder searched recursively for *.json records (required unless --analytic-only)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the tables and meta.json")
    parser.add_argument("--analytic-only", action="store_true",
                        help="write only analytic.csv into --out, from the code alone (no records read; the other "
                             "tables there are left as they are): for a tables folder without its records")


def run(args) -> int:
    import sys

    from posbench.aggregate import aggregate, summary, write_analytic

    if args.analytic_only:
        problem = None
    elif args.records is None:
        problem = "required unless --analytic-only"
    else:
        problem = None if any(args.records.rglob("*.json")) else f"no *.json records under {args.records}"
    if problem:
        print(f"posbench aggregate: error: argument --records: {problem}; nothing written", file=sys.stderr)
        return 1
    if arguments.unwritable("aggregate", "--out", args.out, folder=True):
        return 1
    if args.analytic_only:
        print(f"wrote {write_analytic(args.out)}")
        return 0
    print(summary(aggregate(args.records, args.out), args.out))
    return 0
