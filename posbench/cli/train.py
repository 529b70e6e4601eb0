"""``python -m posbench train``: train one (task, encoding, size, seed) cell and write its record."""

from __future__ import annotations

import argparse
import sys

from posbench import encodings, tasks
from posbench.cli import write_and_exit_code
from posbench.model import SIZES
from posbench.train import TrainConfig, resolve, train

HELP = "train one task × encoding × size × seed, evaluate at the training length and beyond, write a JSON record"


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", required=True, choices=tasks.names(), metavar="TASK",
                        help=f"one of: {', '.join(tasks.names())}")
    parser.add_argument("--encoding", required=True, choices=encodings.names(), metavar="ENCODING",
                        help=f"one of: {', '.join(encodings.names())}")
    parser.add_argument("--size", default="tiny", choices=list(SIZES), help="model size (default: tiny)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed for initialisation and training data")
    parser.add_argument("--steps", type=positive_int, help="optimizer steps (default: the task's)")
    parser.add_argument("--batch-size", type=positive_int, help="training batch size (default: the task's)")
    parser.add_argument("--lr", type=positive_float, help="peak learning rate (default: the task's)")
    parser.add_argument("--train-length", type=positive_int,
                        help="longest training length L; evaluation at L·(1, 1.25, 1.5, 2, 4, 8) (default: the task's)")
    parser.add_argument("--data", metavar="PATH", help="lm_prose: a UTF-8 text file; lm_code: a folder of *.py files")
    parser.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads (default: 1)")
    parser.add_argument("--log-every", type=positive_int, default=100, help="a progress line every N steps (stderr)")
    parser.add_argument("--out", required=True, metavar="PATH.json", help="where the record goes (written atomically)")


def run(args: argparse.Namespace) -> int:
    task_options = {k: v for k, v in (("train_length", args.train_length), ("data", args.data)) if v is not None}
    config = TrainConfig(task=args.task, encoding=args.encoding, size=args.size, seed=args.seed, steps=args.steps,
                         batch_size=args.batch_size, lr=args.lr, task_options=task_options,
                         threads=args.threads, log_every=args.log_every)
    try:
        resolve(config)
    except (ValueError, OSError) as error:
        print(f"posbench train: error: {error}", file=sys.stderr)
        return 2
    record = train(config)
    return write_and_exit_code("train", args.out, record)
