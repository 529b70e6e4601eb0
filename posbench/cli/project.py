"""``python -m posbench project``: the projected cost of each encoding at a deployed model's architecture
and context on a named GPU (:mod:`posbench.projection`; nothing is measured), or, with ``--check``, the
cost model against the latencies this machine measured (:mod:`posbench.projection_check`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from posbench import encodings
from posbench.cli import arguments
from posbench.devices import BFLOAT16, FLOAT32
from posbench.sizes import SIZES

HELP = ("Project each encoding's parameters, FLOPs, memory and roofline time per token at a model architecture "
        "(named or a transformers config.json) and context on a named GPU; --check: the model against this CPU's "
        "latencies.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from posbench.projection import ARCHITECTURES, DEVICES

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
