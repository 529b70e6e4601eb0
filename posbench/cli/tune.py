"""``python -m posbench tune``: one declared comparison's arms on one learning-rate grid -> its rows of lr.csv."""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path

import pandas as pd

from posbench.cli import arguments
from posbench.devices import CPU
from posbench.sizes import SIZES

HELP = ("tune both arms of declared comparisons on one log-spaced learning-rate grid each (3 pilot seeds, the "
        "comparison's budget and checkpoints, chosen on validation loss); writes OUT/<comparison>-<size>.csv and the "
        "records")


def add_arguments(parser) -> None:
    parser.add_argument("--comparison", nargs="+", required=True,
                        help="declared comparisons' ids (posbench/comparisons.yaml)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the records and each comparison's rows")
    parser.add_argument("--lr-table", type=Path, metavar="PATH.csv",
                        help="also write every given comparison's rows here (lr.csv, what train.lr_table reads)")
    parser.add_argument("--preset", default="all", help="tune at this preset's budgets (comparisons.yaml's "
                        "budgets.scale): default, full, or all (the declared steps; default)")
    parser.add_argument("--size", nargs="+", default=["tiny"], choices=list(SIZES), metavar="S",
                        help=f"the model sizes to tune at, each on its own grid: {', '.join(SIZES)} (default: tiny)")
    parser.add_argument("--threads", type=arguments.positive_int, default=1, help="torch CPU threads (default: 1)")
    parser.add_argument("--device", default=CPU, help="where the pilots train: cpu, cuda, cuda:N (default: cpu)")
    parser.add_argument("--start-from", type=Path, metavar="LR.csv",
                        help="start each comparison's grid at the rates an earlier tuning (an lr.csv, e.g. at "
                             "another size) chose for its arms, on the default's lattice (default: the task's rate)")
    parser.add_argument("--collect", action="store_true",
                        help="train nothing: write --lr-table from the rows each comparison's own tuning already "
                             "wrote (OUT/<comparison>-<size>.csv), as they are")


def run(args) -> int:
    from posbench import comparisons, records, tune

    try:
        chosen_comparisons = [tune.declared(name, args.preset) for name in dict.fromkeys(args.comparison)]
    except ValueError as error:
        print(f"posbench tune: error: {error}", file=sys.stderr)
        return 2
    if args.start_from is not None and not args.start_from.is_file():
        print(f"posbench tune: error: argument --start-from: no file {args.start_from}; allowed: an lr.csv of an "
              "earlier tuning", file=sys.stderr)
        return 2
    if (arguments.unwritable("tune", "--out", args.out, folder=True)
            or arguments.unwritable("tune", "--lr-table", args.lr_table)):
        return 1
    if args.collect:
        return collect(chosen_comparisons, args)
    budgets = comparisons.load().budget_rule
    tables = []
    for comparison in chosen_comparisons:
        for size in dict.fromkeys(args.size):
            tables.append(tune_one(comparison, size, args, budgets))
    if args.lr_table:
        path = records.write_atomically(args.lr_table, functools.partial(pd.concat(tables).to_csv, index=False))
        print(f"wrote {path}: {len(tables)} comparison(s)")
    return 0


def collect(chosen_comparisons, args) -> int:
    """--collect: the lr table as the concatenation of the tables each comparison's tuning wrote. Tuning again to
    collect would retrain any cell whose settings differ from that tuning's (its grid's start, its device)."""
    from posbench import records

    if args.lr_table is None:
        print("posbench tune: error: argument --collect: needs --lr-table PATH.csv", file=sys.stderr)
        return 2
    wanted = [args.out / f"{c.id}-{size}.csv" for c in chosen_comparisons for size in dict.fromkeys(args.size)]
    missing = [str(path) for path in wanted if not path.is_file()]
    if missing:
        print(f"posbench tune: error: argument --collect: no tuned table {', '.join(missing)}; allowed: the tables "
              "`posbench tune` wrote under --out (tune each comparison first)", file=sys.stderr)
        return 2
    table = pd.concat([pd.read_csv(path) for path in wanted])
    path = records.write_atomically(args.lr_table, functools.partial(table.to_csv, index=False))
    print(f"wrote {path}: {len(wanted)} comparison(s), collected")
    return 0


def earlier_rates(args, comparison_id: str) -> dict[str, float]:
    """encoding -> the rate ``--start-from``'s table chose for that arm of ``comparison_id``; none without."""
    if args.start_from is None:
        return {}
    chosen = pd.read_csv(args.start_from).query("chosen and comparison == @comparison_id")
    return {r.encoding: float(r.lr) for r in chosen.itertuples()}


def tune_one(comparison, size: str, args, budgets) -> pd.DataFrame:
    """Tune one comparison at one size (its records kept where a rerun finds them) and write its rows; returns
    them."""
    from posbench import batch, records, tune
    from posbench.train import TrainConfig, resolve, train

    def validation_loss(arm, rate: float, seed: int) -> float:
        """Train (or keep) one cell and return its validation loss at the last checkpoint (inf: diverged)."""
        width = None if arm.d_model is None else arm.resolved(size)[1]  # None: the size's own
        config = TrainConfig(task=arm.task, encoding=arm.encoding, size=size, d_model=width, seed=seed, lr=rate,
                             task_options={"train_length": arm.train_length} if arm.train_length else {},
                             threads=args.threads, device=args.device, checkpoints=budgets.budgets(comparison.budget),
                             decay_fraction=budgets.decay_fraction)
        folder = "/".join(str(part) for part in (arm.task, arm.encoding, arm.train_length, width) if part)
        out = args.out / "records" / size / comparison.id / folder / f"lr{rate!r}" / f"seed{seed}.json"
        cell = batch.Cell(out, resolve(config).record_config(), lambda: train(config))
        if batch.run_cells("tune", [cell]):
            raise RuntimeError(f"{out}: the cell was skipped or failed")
        record = records.read_record(out)
        return record["validation"]["loss"] if record["status"] == "ok" else math.inf

    centre = tune.grid_centre(comparison.arms, earlier_rates(args, comparison.id))
    table = tune.table(comparison, validation_loss, size, centre)
    path = records.write_atomically(args.out / f"{comparison.id}-{size}.csv",
                                    functools.partial(table.to_csv, index=False))
    chosen = table[table["chosen"]]
    print(f"wrote {path}: " + "; ".join(f"{r.encoding} lr {r.lr:g} (grid {r.grid}{', at an edge' if r.at_edge else ''})"
                                        for r in chosen.itertuples()))
    return table
