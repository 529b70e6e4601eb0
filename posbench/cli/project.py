"""``python -m posbench project``: the projected cost of each encoding at a deployed model's architecture
and context on a named GPU (:mod:`posbench.projection`; nothing is measured); with ``--train-tokens``, the
projected FLOPs and GPU-hours of a training run of posbench's model at a size; or, with ``--check``, the
cost model against the latencies this machine measured (:mod:`posbench.projection_check`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from posbench import encodings, tasks
from posbench.cli import arguments
from posbench.devices import BFLOAT16, FLOAT32
from posbench.sizes import SIZES

HELP = ("Project each encoding's parameters, FLOPs, memory and roofline time per token at a model architecture "
        "(named or a transformers config.json) and context on a named GPU; --check: the model against this CPU's "
        "latencies; --train-tokens: the GPU-hours of a training run of a posbench size.")
EFFICIENCY = "a number in (0, 1]"
TRAINING_FLAGS = ("train_efficiency", "train_task")  # what --train-tokens reads


def efficiency(text: str) -> float:
    """``--train-efficiency``: the share of the dense peak a training run reaches, in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise arguments.not_allowed(text, EFFICIENCY) from None
    if not 0 < value <= 1:
        raise arguments.not_allowed(text, EFFICIENCY)
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from posbench.projection import ARCHITECTURES, DEVICES, TRAIN_EFFICIENCY, TRAIN_TASK

    architectures = (*ARCHITECTURES, *(f"posbench-{size}" for size in SIZES))
    model = parser.add_mutually_exclusive_group()
    model.add_argument("--shape", type=arguments.choice(architectures), default="llama-3-8b",
                       help=f"the model's architecture, one of {', '.join(architectures)} (default: %(default)s)")
    model.add_argument("--hf-config", type=arguments.json_object_file, metavar="PATH.json",
                       help="instead of --shape: the architecture a transformers config.json gives")
    parser.add_argument("--context", type=arguments.positive_int, default=131072,
                        help="tokens in the context (default: %(default)s)")
    parser.add_argument("--device", type=arguments.choice(tuple(DEVICES)), default="h100",
                        help=f"one of {', '.join(DEVICES)} (default: %(default)s)")
    parser.add_argument("--dtype", type=arguments.choice((BFLOAT16, FLOAT32)), default=BFLOAT16,
                        help="weights, activations and the datasheet peak used (default: %(default)s)")
    parser.add_argument("--encoding", nargs="+", metavar="E", type=arguments.choice(tuple(encodings.names())),
                        help="encodings to project (default: every 1-D one evaluated as itself)")
    parser.add_argument("--op-overhead-us", type=arguments.non_negative_number, metavar="US",
                        help="per-operation overhead added to the roofline (default: none for a datasheet device)")
    parser.add_argument("--train-tokens", type=arguments.positive_number, metavar="N",
                        help="instead: project a training run on N tokens (e.g. 8.2e6) of each encoding at a "
                             "posbench-<size> --shape: its FLOPs and GPU-hours (projected, not measured)")
    parser.add_argument("--train-efficiency", type=efficiency, metavar="F",
                        help="with --train-tokens: the share of the dense peak the run is assumed to reach, in "
                             f"(0, 1] (default: {TRAIN_EFFICIENCY}, an assumption, not a measurement)")
    parser.add_argument("--train-task", type=arguments.choice(tuple(tasks.names())), metavar="TASK",
                        help=f"with --train-tokens: the task whose batch and training length the run takes (default: "
                             f"{TRAIN_TASK})")
    parser.add_argument("--check", type=arguments.existing_folder, metavar="TABLES",
                        help="instead: predict the measured base latencies of TABLES/cost.csv with this CPU's "
                             "measured rates and write check.csv and check.txt to --out")
    parser.add_argument("--out", type=Path, default=Path("results/projection-check"),
                        help="with --check: the folder (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    from posbench import projection

    if args.check:
        from posbench import projection_check

        if arguments.unwritable("project", "--out", args.out, folder=True):
            return 1
        try:
            _, passed = projection_check.write(args.check, args.out)
        except ValueError as error:
            print(f"posbench project: error: argument --check: {error}", file=sys.stderr)
            return 2
        return 0 if passed else 1
    if args.train_tokens is not None:
        return run_training(args)
    given = [name for name in TRAINING_FLAGS if getattr(args, name) is not None]
    if given:
        print(f"posbench project: error: argument --{given[0].replace('_', '-')}: applies only with --train-tokens",
              file=sys.stderr)
        return 2
    try:
        arch = (projection.architecture_from_hf_config(args.hf_config) if args.hf_config is not None
                else projection.named_architecture(args.shape))
    except ValueError as error:
        print(f"posbench project: error: argument --hf-config: {error}", file=sys.stderr)
        return 2
    device = projection.DEVICES[args.device]
    overhead = None if args.op_overhead_us is None else args.op_overhead_us * 1e-6
    rows, skipped = projection.project_all(arch, args.context, device, args.dtype, args.encoding, overhead)
    print(projection.heading(arch, args.context, device, args.dtype, overhead))
    print(projection.table(rows))
    if skipped:
        print("not projected: " + "; ".join(skipped))
    return 0


def run_training(args: argparse.Namespace) -> int:
    """The projected training run of each encoding at a posbench size (``--shape posbench-<size>``)."""
    from posbench import projection

    size = args.shape.removeprefix("posbench-")
    if args.hf_config is not None or size not in SIZES:
        shape = "--hf-config" if args.hf_config is not None else args.shape
        print(f"posbench project: error: argument --train-tokens: applies to a posbench-<size> --shape (posbench.flops "
              f"counts its training FLOPs), not {shape}", file=sys.stderr)
        return 2
    device = projection.DEVICES[args.device]
    rows, skipped = projection.project_training_all(
        size, args.train_tokens, device, args.dtype, args.train_efficiency or projection.TRAIN_EFFICIENCY,
        args.train_task or projection.TRAIN_TASK, args.encoding)
    if not rows:
        print(f"posbench project: error: argument --encoding: none can train at {args.shape}: {'; '.join(skipped)}",
              file=sys.stderr)
        return 2
    print(projection.training_heading(rows, device))
    print(projection.training_table(rows))
    if skipped:
        print("not projected: " + "; ".join(skipped))
    return 0
