"""``python -m posbench train``: train (task, encoding, size) for one or more seeds, a record per seed.

Several seeds run in one process (:mod:`posbench.batch`): a seed whose record is already there, for
the same config, is kept and not trained again.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from posbench import batch, encodings, tasks
from posbench.cli import arguments
from posbench.devices import TRAINING_DEVICES, TRAINING_DTYPES
from posbench.sizes import SIZES
from posbench.tasks.lm_prose import TEXTS
from posbench.train import TrainConfig, resolve, train

HELP = ("train one task × encoding × size for one or more seeds, evaluate at the training length and beyond, "
        "write a JSON record per seed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", required=True, choices=tasks.names(), metavar="TASK",
                        help=f"one of: {', '.join(tasks.names())}")
    encoding = parser.add_mutually_exclusive_group(required=True)
    encoding.add_argument("--encoding", choices=encodings.names(), metavar="ENCODING",
                          help=f"one of: {', '.join(encodings.names())}")
    arguments.add_hf_config_arguments(encoding, parser)
    parser.add_argument("--size", default="tiny", choices=list(SIZES), help="model size (default: tiny)")
    parser.add_argument("--d-model", type=arguments.positive_int,
                        help="model width instead of the size's (its depth and heads kept): a width sweep")
    parser.add_argument("--seed", type=arguments.non_negative_int, nargs="+", default=[0],
                        help="seed(s) for initialisation and training data, run one after another (default: 0)")
    parser.add_argument("--steps", type=arguments.positive_int, help="optimizer steps (default: the task's)")
    parser.add_argument("--checkpoints", type=arguments.positive_int, nargs="+", default=[], metavar="STEPS",
                        help="warmup–stable–decay with an annealed checkpoint at each of these budgets (increasing; "
                             "the last is the run's steps), each evaluated; default: one cosine run")
    parser.add_argument("--decay-fraction", type=arguments.positive_number, default=TrainConfig.decay_fraction,
                        help="with --checkpoints: each decay branch as a share of its budget (default %(default)s)")
    parser.add_argument("--batch-size", type=arguments.positive_int, help="training batch size (default: the task's)")
    parser.add_argument("--lr", type=arguments.positive_number, help="peak learning rate (default: the task's)")
    parser.add_argument("--train-length", type=arguments.positive_int,
                        help="longest training length L; evaluation at L·(1, 1.25, 1.5, 2, 4, 8) (default: the task's)")
    parser.add_argument("--data", metavar="PATH", help="lm_prose: a UTF-8 text file; lm_code: a folder of *.py files")
    parser.add_argument("--text", choices=TEXTS, help="lm_prose: the shipped text it reads (default: wikipedia, the "
                                                      "English corpus `make corpus` downloads; python_docs: Python's "
                                                      "documentation, in the standard library)")
    parser.add_argument("--eval-scaling", nargs="+", default=[], metavar="TYPE:FACTOR",
                        help="RoPE family only: also evaluate the trained model with these training-free scalings "
                             "(linear, dynamic, yarn, llama3), e.g. yarn:4 linear:4")
    add_run_arguments(parser)
    parser.add_argument("--threads", type=arguments.positive_int, default=1, help="torch CPU threads (default: 1)")
    parser.add_argument("--log-every", type=arguments.positive_int, default=100,
                        help="a progress line every N steps (stderr)")
    parser.add_argument("--out", required=True, metavar="PATH.json",
                        help="where each record goes (written atomically); with several seeds it contains {seed}")
    parser.add_argument("--manifest", type=Path, metavar="PATH.json",
                        help="written last: the records of this run and their status (a workflow job's output)")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """``--device`` and ``--dtype`` of a training run; ``probe`` takes them too, for its language model."""
    parser.add_argument("--device", default=TrainConfig.device, metavar="D",
                        type=arguments.matching(TRAINING_DEVICES.pattern, TRAINING_DEVICES.allowed),
                        help=f"{TRAINING_DEVICES.allowed}; one this machine lacks gives a 'skipped' record "
                             "(default %(default)s)")
    parser.add_argument("--dtype", default=TrainConfig.dtype, choices=TRAINING_DTYPES,
                        help="float32; or bfloat16: the forward autocast to it, weights and optimizer state kept "
                             "float32, the loss in float32. No float16: it would need loss scaling "
                             "(default %(default)s)")


def run(args: argparse.Namespace) -> int:
    task_options = {k: v for k, v in (("train_length", args.train_length), ("data", args.data), ("text", args.text))
                    if v is not None}
    eval_scaling = tuple(dict.fromkeys(args.eval_scaling))
    try:
        encoding, encoding_options = arguments.hf_encoding(args)
        configs = [TrainConfig(task=args.task, encoding=encoding, encoding_options=encoding_options, size=args.size,
                               d_model=args.d_model, seed=seed, steps=args.steps, batch_size=args.batch_size,
                               lr=args.lr, task_options=task_options, threads=args.threads, log_every=args.log_every,
                               device=args.device, dtype=args.dtype, eval_scaling=eval_scaling,
                               checkpoints=tuple(args.checkpoints), decay_fraction=args.decay_fraction)
                   for seed in dict.fromkeys(args.seed)]
        jobs = [resolve(config) for config in configs]
        paths = batch.record_paths(args.out, [{"seed": config.seed} for config in configs])
    except (ValueError, OSError) as error:
        print(f"posbench train: error: {error}", file=sys.stderr)
        return 2
    if arguments.unwritable("train", "--out", *paths) or arguments.unwritable("train", "--manifest", args.manifest):
        return 1
    cells = [batch.Cell(path, job.record_config(), lambda config=config: train(config))
             for path, job, config in zip(paths, jobs, configs)]
    return batch.run_cells("train", cells, args.manifest)
