"""``python -m posbench preflight``: can this job use a device? The workflow runs it once per configured
device before any profile job on it, so a missing GPU stops the run in one line, not in every cell."""

from __future__ import annotations

import sys
from pathlib import Path

from posbench.cli import arguments

HELP = "check a device (torch sees it, a matmul runs, NVML finds it) -> a JSON note; exit 1 with the reason if not"


def add_arguments(parser) -> None:
    from posbench.devices import ANY_DEVICE

    parser.add_argument("--device", required=True, type=arguments.matching(ANY_DEVICE.pattern, ANY_DEVICE.allowed),
                        help=ANY_DEVICE.allowed)
    parser.add_argument("--out", type=Path, required=True, help="where the note goes (written only on success)")


def run(args) -> int:
    from posbench import records
    from posbench.profile import preflight

    if arguments.unwritable("preflight", "--out", args.out):
        return 1
    try:
        found = preflight(args.device)
    except RuntimeError as error:
        print(f"posbench preflight: error: {error}", file=sys.stderr)
        return 1
    records.write_json(args.out, found)
    print(f"posbench preflight: {args.device} ({found['name']}) ok -> {args.out}", file=sys.stderr)
    return 0
