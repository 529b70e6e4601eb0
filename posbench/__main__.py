"""``python -m posbench <command>``: each command lives in its own module under ``posbench.cli``.

A command module exposes ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``.
Bad arguments print one line naming the argument and the allowed values (worded once, in
:mod:`posbench.cli.arguments`), and exit 2. A write that fails (a full disk) prints one line naming the
file and exits 1; SIGINT or SIGTERM, one line saying what was kept, and exit 128 + the signal
(:mod:`posbench.faults`); a reader that stops early (``posbench advise | head``), exit 1 and no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from posbench.faults import Interrupted, WriteError, signals_interrupt

COMMANDS = {  # name -> module under posbench.cli
    "profile": "posbench.cli.profile",
    "train": "posbench.cli.train",
    "bench": "posbench.cli.bench",
    "probe": "posbench.cli.probe",
    "aggregate": "posbench.cli.aggregate",
    "tune": "posbench.cli.tune",
    "judge": "posbench.cli.judge",
    "report": "posbench.cli.report",
    "advise": "posbench.cli.advise",
    "project": "posbench.cli.project",
    "preflight": "posbench.cli.preflight",
}


class OneLineParser(argparse.ArgumentParser):
    """argparse, but an error is one line on stderr (no usage block) and exit code 2."""

    def error(self, message: str):
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def available_commands(names=COMMANDS) -> dict[str, object]:
    modules = {}
    for name in names:
        module = COMMANDS[name]
        try:
            modules[name] = importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name != module:  # the command exists but something it needs is missing
                raise
    return modules


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = OneLineParser(prog="posbench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    # import only the command asked for: every job of a sweep pays this start-up
    chosen = argv[:1] if argv[:1] and argv[0] in COMMANDS else COMMANDS
    modules = available_commands(chosen)
    for name, module in modules.items():
        sub = commands.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
    args = parser.parse_args(argv)
    try:
        with signals_interrupt():
            status = modules[args.command].run(args)
            sys.stdout.flush()  # a reader gone early (posbench … | head) shows here, not in Python's flush at exit
            return status
    except BrokenPipeError:  # stdout to /dev/null, so that Python's own flush at exit cannot fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except WriteError as error:
        print(f"posbench {args.command}: error: {error}; rerun once it can be written, finished files stand",
              file=sys.stderr)
        return 1
    except Interrupted as stop:
        print(f"posbench {args.command}: {stop}", file=sys.stderr)
        return stop.exit_status


if __name__ == "__main__":
    sys.exit(main())
