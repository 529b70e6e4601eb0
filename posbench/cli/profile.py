"""``python -m posbench profile``: measure cells and write one JSON record per cell.

The measuring is :mod:`posbench.profile`; this module turns the arguments into one
:class:`~posbench.profile.ProfileConfig` per (length, encoding) and runs them as a batch
(:mod:`posbench.batch`: a cell whose record is already there, for the same config, is kept); the
encodings of one length are timed together, in alternation (:func:`posbench.profile.profile_together`).
Bad arguments: one line on stderr, exit 2, nothing written. ``ok`` and ``oom`` exit 0; ``skipped``
(a device this machine lacks) and ``error`` write their record, no manifest, and exit 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from posbench import batch, encodings
from posbench.cli import arguments
from posbench.devices import ANY_DEVICE, TORCH_DTYPES
from posbench.profile import MODES, ProfileConfig, check, profile_by_length
from posbench.sizes import SIZES

HELP = ("Measure cells (one or more encodings and lengths, size, device): latency, memory, FLOPs, parameters "
        "-> a JSON record per cell.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cell = parser.add_argument_group("the cell")
    encoding = cell.add_mutually_exclusive_group(required=True)
    encoding.add_argument("--encoding", choices=encodings.names(), nargs="+", metavar="E",
                          help=f"one or more of: {', '.join(encodings.names())}; the encodings of one length are "
                               "timed in alternation, in one process")
    arguments.add_hf_config_arguments(encoding, cell)
    cell.add_argument("--size", required=True, choices=list(SIZES), metavar="S", help=f"one of: {', '.join(SIZES)}")
    cell.add_argument("--seq-len", required=True, type=arguments.positive_int, nargs="+", metavar="L",
                      help="tokens per sequence; several lengths are measured one after another")
    cell.add_argument("--device", default=ProfileConfig.device, metavar="D",
                      type=arguments.matching(ANY_DEVICE.pattern, ANY_DEVICE.allowed),
                      help=f"{ANY_DEVICE.allowed}; one this machine lacks: a 'skipped' record, exit 1 "
                           "(default %(default)s)")
    cell.add_argument("--batch", default=ProfileConfig.batch, type=arguments.positive_int, metavar="B",
                      help="sequences per step (default %(default)s)")
    cell.add_argument("--dtype", default=ProfileConfig.dtype, choices=list(TORCH_DTYPES),
                      help="weights and activations (default %(default)s)")
    cell.add_argument("--mode", default=ProfileConfig.mode, choices=MODES,
                      help="infer: a forward pass in inference mode; train: forward + backward + AdamW step")
    cell.add_argument("--max-len", type=arguments.positive_int, metavar="N",
                      help="positions the encoding is built for, i.e. rows of a learned table (default: --seq-len)")
    timing = parser.add_argument_group("timing")
    timing.add_argument("--threads", type=arguments.positive_int, metavar="N",
                        help="torch CPU threads (default: torch's)")
    timing.add_argument("--warmup", default=ProfileConfig.warmup, type=arguments.non_negative_int, metavar="N",
                        help="untimed steps first (default %(default)s)")
    timing.add_argument("--min-repeats", default=ProfileConfig.min_repeats, type=arguments.positive_int, metavar="N",
                        help="timed steps at least (default %(default)s)")
    timing.add_argument("--min-seconds", default=ProfileConfig.min_seconds, type=arguments.non_negative_number,
                        metavar="S", help="and timed for at least this long (default %(default)s)")
    timing.add_argument("--seed", default=ProfileConfig.seed, type=arguments.non_negative_int,
                        help="weights and inputs (default %(default)s)")
    parser.add_argument("--out", required=True, metavar="PATH.json",
                        help="where each record goes (written atomically); with several lengths it contains {seq_len}, "
                             "with several encodings {encoding}")
    parser.add_argument("--manifest", type=Path, metavar="PATH.json",
                        help="written last: the records of this run and their status (a workflow job's output)")
    parser.epilog = ("Status ok and oom (a failed allocation or a kill of the measuring process) exit 0; skipped (a "
                     "device this machine lacks) and error write their record but no manifest and exit 1; a bad "
                     "argument writes nothing and exits 2.")


def run(args: argparse.Namespace) -> int:
    try:
        chosen, encoding_options = arguments.hf_encoding(args)
        configs = [ProfileConfig(encoding=encoding, encoding_options=encoding_options, size=args.size,
                                 seq_len=seq_len, max_len=args.max_len, device=args.device, batch=args.batch,
                                 dtype=args.dtype, mode=args.mode, threads=args.threads, warmup=args.warmup,
                                 min_repeats=args.min_repeats, min_seconds=args.min_seconds, seed=args.seed)
                   for seq_len in dict.fromkeys(args.seq_len) for encoding in dict.fromkeys(args.encoding or [chosen])]
        for config in configs:
            check(config)
        paths = batch.record_paths(args.out, [{"encoding": c.encoding, "seq_len": c.seq_len} for c in configs])
    except ValueError as error:
        print(f"posbench profile: error: {error}", file=sys.stderr)
        return 2
    if arguments.unwritable("profile", "--out", *paths) or arguments.unwritable("profile", "--manifest", args.manifest):
        return 1
    cells = [batch.Cell(path, config.record_config()) for path, config in zip(paths, configs)]
    return batch.run_cells("profile", cells, args.manifest,
                           together=lambda todo: profile_by_length([ProfileConfig(**cell.config) for cell in todo]))
