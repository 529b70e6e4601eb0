"""``python -m posbench judge``: the tables -> the judge step's CSVs beside them (:func:`posbench.judge.write`:
verdicts, trajectory, ledger, claims, advice, axes, shapes, and the projected cost at deployed shapes)."""

from __future__ import annotations

from posbench.cli import arguments

HELP = ("judge the declared comparisons and the article's claims on the tables under --tables; writes "
        "verdicts.csv, trajectory.csv, ledger.csv, claims.csv, probe_claim.csv, advice.csv, axes.csv and shapes.csv "
        "(the published shapes, posbench/shapes.yaml) there (what the report and advise read), and projection.csv "
        "(projected cost at deployed shapes on datasheet GPUs)")


def add_arguments(parser) -> None:
    parser.add_argument("--tables", type=arguments.existing_folder, required=True,
                        help="folder with the aggregate step's tables (extrapolation.csv, accuracy.csv, ...)")
    parser.add_argument("--preset", help="the preset whose declared comparisons decide the rows, e.g. default "
                        "(the others are shown as descriptive); absent or a preset comparisons.yaml does not name: "
                        "every declared comparison decides")
    parser.add_argument("--previous", type=arguments.existing_folder,
                        help="a previous run's tables folder (e.g. the committed reference): ledger.csv then has each "
                             "row's verdict there beside this run's and what changed; absent: no ledger rows")


def run(args) -> int:
    from posbench import judge, verdicts
    from posbench.workflow import second_looks_wanted

    if (arguments.without_rows(args.tables, "judge")
            or arguments.unwritable("judge", "--tables", args.tables, folder=True)):
        return 1
    written = judge.write(args.tables, args.preset, args.previous)
    print("wrote " + ", ".join(str(path) for path in written))
    wanted = [f"{comparison} at {size}" for comparison, size in second_looks_wanted(written[0])]
    print(f"second looks asked for: {', '.join(wanted) or 'none'}")
    for warning in [*verdicts.registration_warnings(written[0]), *verdicts.advice_warnings(args.tables)]:
        print(f"WARNING: {warning}")
    return 0
