"""``python -m posbench judge``: the tables -> the judge step's CSVs (verdicts, claims, advice, axes) beside them,
and the projected cost at deployed shapes (``projection.csv``: :mod:`posbench.projection`, measured nothing)."""

from __future__ import annotations

from posbench.cli import arguments

HELP = ("judge the declared comparisons and the article's claims on the tables under --tables; writes "
        "verdicts.csv, claims.csv, advice.csv and axes.csv there (what the report and advise read), and projection.csv "
        "(projected cost at deployed shapes on datasheet GPUs)")


def add_arguments(parser) -> None:
    parser.add_argument("--tables", type=arguments.existing_folder, required=True,
                        help="folder with the aggregate step's tables (extrapolation.csv, accuracy.csv, ...)")
    parser.add_argument("--preset", help="the preset whose declared comparisons decide the rows, e.g. default "
                        "(the others are shown as descriptive); absent or a preset comparisons.yaml does not name: "
                        "every declared comparison decides")


def run(args) -> int:
    from posbench import projection, verdicts

    if arguments.without_rows(args.tables, "judge"):
        return 1
    written = [*verdicts.write(args.tables, args.preset), projection.write_table(args.tables)]
    print("wrote " + ", ".join(str(path) for path in written))
    return 0
