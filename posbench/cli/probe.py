"""``python -m posbench probe``: read token and position back out of one encoding's input vectors.

Several widths and seeds run in one process (:mod:`posbench.batch`), a record per (width, seed); one
already there for the same config is kept. Bad arguments print one line naming the argument and the
allowed values, exit 2, and write nothing.
"""

from __future__ import annotations

import argparse
import sys
from itertools import product
from pathlib import Path

from posbench import batch
from posbench.cli import arguments
from posbench.cli.train import add_run_arguments
from posbench.probe import EMBEDDINGS, ProbeConfig, check, probe, probe_encodings, record_config

HELP = ("probe one encoding × vocabulary × length at one or more widths and seeds: token and position recovery "
        "(linear, MLP), the information bound and the subspace geometry -> a JSON record per width and seed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--encoding", required=True, choices=probe_encodings(), metavar="ENCODING",
                        help=f"one of: {', '.join(probe_encodings())}")
    parser.add_argument("--d-model", required=True, type=arguments.integer(4), nargs="+", metavar="D",
                        help="model width(s) d, each a multiple of 4 (a naive concat's inputs are d + d wide)")
    parser.add_argument("--embedding", default="random", choices=EMBEDDINGS,
                        help="random: Gaussian, matched in norm to the position vectors; trained: from a short "
                             "lm_prose run (default: random)")
    parser.add_argument("--vocab", type=arguments.integer(2), metavar="V",
                        help="tokens of random embeddings (default 64); trained ones use lm_prose's vocabulary")
    parser.add_argument("--seq-len", type=arguments.integer(2), default=64, metavar="L",
                        help="positions 0 … L-1 (default: 64)")
    parser.add_argument("--seed", type=arguments.non_negative_int, nargs="+", default=[0],
                        help="seed(s) of embeddings, LM run, splits and probes (default: 0)")
    parser.add_argument("--train-steps", type=arguments.positive_int, default=300,
                        help="trained embeddings: optimizer steps of the lm_prose run (default: 300)")
    parser.add_argument("--train-layers", type=arguments.positive_int, default=1,
                        help="layers of that model (default: 1)")
    parser.add_argument("--max-pairs", type=arguments.integer(16), default=4096,
                        help="(token, position) pairs probed, at most the whole grid (default: 4096)")
    add_run_arguments(parser)  # trained embeddings: the lm_prose run's device and precision
    parser.add_argument("--threads", type=arguments.positive_int, default=1, help="torch CPU threads (default: 1)")
    parser.add_argument("--out", required=True, metavar="PATH.json",
                        help="where each record goes (written atomically); with several widths or seeds it "
                             "contains {d_model} and {seed}")
    parser.add_argument("--manifest", type=Path, metavar="PATH.json",
                        help="written last: the records of this run and their status (a workflow job's output)")


def run(args: argparse.Namespace) -> int:
    vocab = args.vocab if args.vocab is not None or args.embedding == "trained" else 64
    configs = [ProbeConfig(encoding=args.encoding, d_model=d_model, vocab=vocab, seq_len=args.seq_len, seed=seed,
                           embedding=args.embedding, train_steps=args.train_steps, train_layers=args.train_layers,
                           max_pairs=args.max_pairs, threads=args.threads, device=args.device, dtype=args.dtype)
               for d_model, seed in product(dict.fromkeys(args.d_model), dict.fromkeys(args.seed))]
    try:
        for config in configs:
            check(config)
        paths = batch.record_paths(args.out, [{"d_model": c.d_model, "seed": c.seed} for c in configs])
    except ValueError as error:
        print(f"posbench probe: error: {error}", file=sys.stderr)
        return 2
    if arguments.unwritable("probe", "--out", *paths) or arguments.unwritable("probe", "--manifest", args.manifest):
        return 1
    cells = [batch.Cell(path, record_config(config), lambda config=config: probe(config))
             for path, config in zip(paths, configs)]
    return batch.run_cells("probe", cells, args.manifest)
