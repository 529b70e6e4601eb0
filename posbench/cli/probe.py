"""``python -m posbench probe``: read token and position back out of one encoding's input vectors.

Bad arguments print one line naming the argument and the allowed values, exit 2, and write nothing.
"""

from __future__ import annotations

import argparse
import sys

from posbench.cli import write_and_exit_code
from posbench.probe import EMBEDDINGS, ProbeConfig, check, probe, probe_encodings

HELP = ("probe one encoding × width × vocabulary × length × seed: token and position recovery (linear, MLP), "
        "the information bound and the subspace geometry -> a JSON record")


def _integer(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed; allowed: an integer >= {minimum}")
        return value

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--encoding", required=True, choices=probe_encodings(), metavar="ENCODING",
                        help=f"one of: {', '.join(probe_encodings())}")
    parser.add_argument("--d-model", required=True, type=_integer(4), metavar="D",
                        help="model width d, a multiple of 4 (a naive concat's inputs are d + d wide)")
    parser.add_argument("--embedding", default="random", choices=EMBEDDINGS,
                        help="random: Gaussian, matched in norm to the position vectors; trained: from a short "
                             "lm_prose run (default: random)")
    parser.add_argument("--vocab", type=_integer(2), metavar="V",
                        help="tokens of random embeddings (default 64); trained ones use lm_prose's vocabulary")
    parser.add_argument("--seq-len", type=_integer(2), default=64, metavar="L", help="positions 0 … L-1 (default: 64)")
    parser.add_argument("--seed", type=_integer(0), default=0, help="seed of embeddings, LM run, splits and probes")
    parser.add_argument("--train-steps", type=_integer(1), default=300,
                        help="trained embeddings: optimizer steps of the lm_prose run (default: 300)")
    parser.add_argument("--train-layers", type=_integer(1), default=1, help="layers of that model (default: 1)")
    parser.add_argument("--max-pairs", type=_integer(16), default=4096,
                        help="(token, position) pairs probed, at most the whole grid (default: 4096)")
    parser.add_argument("--threads", type=_integer(1), default=1, help="torch CPU threads (default: 1)")
    parser.add_argument("--out", required=True, metavar="PATH.json", help="where the record goes (written atomically)")


def run(args: argparse.Namespace) -> int:
    vocab = args.vocab if args.vocab is not None or args.embedding == "trained" else 64
    config = ProbeConfig(encoding=args.encoding, d_model=args.d_model, vocab=vocab, seq_len=args.seq_len,
                         seed=args.seed, embedding=args.embedding, train_steps=args.train_steps,
                         train_layers=args.train_layers, max_pairs=args.max_pairs, threads=args.threads)
    try:
        check(config)
    except ValueError as error:
        print(f"posbench probe: error: {error}", file=sys.stderr)
        return 2
    record = probe(config)
    return write_and_exit_code("probe", args.out, record)
