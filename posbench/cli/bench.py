"""``python -m posbench bench``: the parts of :mod:`posbench.bench` by name (attention ``paths``, encoding
``overhead``, the x-transformers ``peer``, the machine's ``limit``, the longest length ``scale``, ``decode`` and
its transformers ``decode_peer``, training throughput ``train``), written to ``--out`` as CSV and a text table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from posbench import tasks
from posbench.bench import suite
from posbench.bench.base import BENCH_DEVICES, CUDA_PARTS, PARTS, BenchOptions
from posbench.bench.train_throughput import TRAIN_ENCODINGS
from posbench.cli import arguments
from posbench.devices import CPU, missing_device, on_cuda
from posbench.sizes import SIZES

HELP = ("benchmark the harness itself: attention paths, encoding overhead, x-transformers peer, machine limit, "
        "longest length (scale), decode and its transformers peer (decode_peer), training throughput (train)")

QUICK = dict(rounds=5, warmup=1, limit_rounds=2, limit_batch=2, scale_lengths=(1024,), decode_contexts=(256,),
             decode_new_tokens=8, scale_point_seconds=0.5, train_steps=3, train_warmup=1,
             train_profile_steps=1)  # a smoke run
CONTEXTS = "positive integers, comma-separated"


def contexts(text: str) -> tuple[int, ...]:
    """The ``decode`` part's context lengths: ``256,1024,4096``."""
    try:
        chosen = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise arguments.not_allowed(text, CONTEXTS) from None
    if not chosen or min(chosen) < 1:
        raise arguments.not_allowed(text, CONTEXTS)
    return chosen


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("results/bench"),
                        help="folder for bench.csv, bench.txt, samples.json and profiles (default: %(default)s)")
    parser.add_argument("--parts", type=arguments.comma_list(PARTS),
                        help=f"comma-separated subset of {','.join(PARTS)} (default: all; on cuda: "
                             f"{','.join(CUDA_PARTS)})")
    parser.add_argument("--device", default=CPU, type=arguments.matching(BENCH_DEVICES.pattern, BENCH_DEVICES.allowed),
                        help=f"{BENCH_DEVICES.allowed}: where the models and inputs of the timed parts live; on cuda "
                             f"the parts {', '.join(CUDA_PARTS)} (default: %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="few repeats, limit at batch 2, scale only at 1024: a smoke run")
    parser.add_argument("--rounds", type=arguments.positive_int,
                        help="timed rounds of alternation for paths, overhead, peer, decode (default "
                             f"{BenchOptions.rounds})")
    parser.add_argument("--scale-max-len", type=arguments.power_of_two(1024),
                        help=f"longest scale length tried (default {max(BenchOptions.scale_lengths)})")
    parser.add_argument("--train-steps", type=arguments.positive_int,
                        help=f"timed training steps per task in the train part (default {BenchOptions.train_steps})")
    parser.add_argument("--train-encodings", type=arguments.comma_list(tuple(TRAIN_ENCODINGS)),
                        help="comma-separated encodings the train part trains (default: "
                             f"{','.join(BenchOptions.train_encodings)})")
    parser.add_argument("--train-tasks", type=arguments.comma_list(tuple(tasks.names())),
                        help="comma-separated tasks the train part trains (default: "
                             f"{','.join(BenchOptions.train_tasks)}, the default sweep's)")
    parser.add_argument("--train-sizes", type=arguments.comma_list(tuple(SIZES)),
                        help="comma-separated model sizes the train part times each task and encoding at (default: "
                             f"{','.join(BenchOptions.train_sizes)})")
    parser.add_argument("--decode-contexts", type=contexts,
                        help="the decode part's context lengths (default: "
                             f"{','.join(map(str, BenchOptions.decode_contexts))})")
    parser.add_argument("--decode-new-tokens", type=arguments.integer(2),
                        help="tokens each generate call makes in decode_peer (default "
                             f"{BenchOptions.decode_new_tokens})")
    parser.add_argument("--threads", type=arguments.positive_int, default=BenchOptions.threads,
                        help="torch threads (default: %(default)s)")
    parser.add_argument("--processes", type=arguments.positive_int, default=BenchOptions.processes,
                        help="run each part in this many fresh processes, one after another, and report the "
                             "median of each figure, with each process's value beside the judged ratios "
                             "(default: %(default)s, this process)")
    parser.add_argument("--flex", action="store_true",
                        help="also time FlexAttention in 'paths' (torch.compile: needs a C++ compiler; the "
                             "part's notes give the compile time)")


def options_from(args: argparse.Namespace) -> BenchOptions:
    chosen = dict(QUICK) if args.quick else {}
    if args.rounds:
        chosen["rounds"] = args.rounds
    if args.train_steps:
        chosen["train_steps"] = args.train_steps
    for name in ("train_encodings", "train_tasks", "train_sizes"):
        if getattr(args, name):
            chosen[name] = tuple(getattr(args, name))
    if args.decode_contexts:
        chosen["decode_contexts"] = args.decode_contexts
    if args.decode_new_tokens:
        chosen["decode_new_tokens"] = args.decode_new_tokens
    if args.scale_max_len:
        chosen["scale_lengths"] = tuple(n for n in BenchOptions.scale_lengths if n <= args.scale_max_len)
    parts = args.parts or (CUDA_PARTS if on_cuda(args.device) else PARTS)
    return BenchOptions(parts=parts, device=args.device, threads=args.threads, processes=args.processes,
                        flex=args.flex, **chosen)


def refusal(args: argparse.Namespace) -> tuple[str, int] | None:
    """Why the bench cannot run as asked, in one line, and its exit status: a part that does not run on
    CUDA (2, a bad argument), or a device this machine lacks (1); ``None`` when it can."""
    if on_cuda(args.device):
        host_only = [part for part in args.parts or () if part not in CUDA_PARTS]
        if host_only:
            return (f"argument --parts: {host_only[0]!r} is not allowed with --device {args.device}; allowed: "
                    f"{', '.join(CUDA_PARTS)}"), 2
    missing = missing_device(args.device)
    return (f"argument --device: {missing}", 1) if missing else None


def run(args: argparse.Namespace) -> int:
    refused = refusal(args)
    if refused:
        print(f"posbench bench: error: {refused[0]}", file=sys.stderr)
        return refused[1]
    if arguments.unwritable("bench", "--out", args.out, folder=True):
        return 1
    results = suite.run_bench(options_from(args), args.out)
    missed = [f"{row.part} {row.item}" for result in results for row in result.rows if row.meets is False]
    print(f"wrote {args.out / 'bench.csv'} and {args.out / 'bench.txt'}; targets missed: "
          f"{', '.join(missed) or 'none'}")
    return 0  # a missed target is a finding of the bench, not a failure of the program
