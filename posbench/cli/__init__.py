"""Command-line programs: one module per ``python -m posbench`` command."""

import sys

from posbench import records


def write_and_exit_code(command: str, out, record: dict) -> int:
    """Write a measured cell's record, whatever its status; exit 0 for ``ok``, else say why and exit 1."""
    records.write_record(out, record)
    if record["status"] != "ok":
        print(f"posbench {command}: {record['status']}: {record['reason']}", file=sys.stderr)
        return 1
    return 0
