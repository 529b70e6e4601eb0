"""``python -m posbench advise``: which encoding to use, ranked, from the tables alone (:mod:`posbench.advise`)."""

from __future__ import annotations

import argparse
import json
import sys

from posbench.cli import arguments
from posbench.devices import ANY_DEVICE, CPU
from posbench.guidance import KINDS

HELP = "Rank the encodings for a situation (task kind, lengths, budgets) from results/tables; nothing is measured."
CORE_FILES = "verdicts.csv, accuracy.csv and cost.csv"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from posbench import advise, projection

    parser.add_argument("--tables", type=arguments.existing_folder, required=True,
                        help=f"folder with {CORE_FILES} (verdicts.csv: `python -m posbench report --verdicts`)")
    parser.add_argument("--task", type=arguments.choice(KINDS), help="the kind of task (each task's `kind` trait)")
    parser.add_argument("--train-len", type=arguments.positive_int, help="training length (tokens)")
    parser.add_argument("--deploy-len", type=arguments.positive_int, help="length the model must work at")
    parser.add_argument("--param-budget", type=arguments.non_negative_int,
                        help="most parameters the encoding may add over sinusoidal (which adds none)")
    parser.add_argument("--latency-budget-ms", type=arguments.positive_number,
                        help="most milliseconds per forward (per token with --decode) on --device")
    parser.add_argument("--device", type=arguments.choice(ANY_DEVICE.kinds), default=CPU,
                        help="device of the latency budget")
    parser.add_argument("--decode", action="store_true", help="served token by token: decode rows of cost.csv")
    parser.add_argument("--gpu", type=arguments.choice(tuple(projection.DEVICES)),
                        help="a datasheet GPU posbench has not measured: the latency is projected there "
                             "(posbench.projection), labelled projected")
    parser.add_argument("--shape", type=arguments.choice(tuple(projection.ARCHITECTURES)),
                        help=f"with --gpu: a deployed model's architecture, projected (default: posbench's "
                             f"{advise.PROJECTED_SIZE})")
    parser.add_argument("--format", type=arguments.choice(("text", "json")), default="text")


def run(args: argparse.Namespace) -> int:
    from posbench import advise

    try:
        inputs = advise.load(args.tables)
    except advise.MissingTable as missing:
        print(f"posbench advise: error: argument --tables: {args.tables} has no {missing}.csv; allowed: a folder "
              f"with {CORE_FILES}", file=sys.stderr)
        return 2
    try:
        situation = advise.Situation(args.task, args.train_len, args.deploy_len, args.param_budget,
                                     args.latency_budget_ms, args.device, args.decode, args.shape, args.gpu)
    except ValueError as error:
        print(f"posbench advise: error: argument --shape: {error}", file=sys.stderr)
        return 2
    advice = advise.advise(situation, inputs)
    print(json.dumps(advice.as_dict(), indent=1, ensure_ascii=False) if args.format == "json" else advice.text())
    return 0


