"""``python -m posbench report``: the PDF (and the figures as PNGs) from the tables alone."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from posbench.cli import arguments

HELP = ("Build the PDF report (verdicts, claims, figures, appendix) from results/tables and the judge step's "
        "verdicts.csv and claims.csv there; nothing is re-measured or re-judged.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tables", type=arguments.existing_folder, required=True,
                        help="folder with cost.csv, accuracy.csv, ... and meta.json")
    parser.add_argument("--out", type=Path, required=True, help="the PDF to write, e.g. results/report.pdf")
    config = parser.add_mutually_exclusive_group()
    config.add_argument("--config", type=Path, help="workflow config file (YAML) to print in the appendix")
    config.add_argument("--config-json", help="the workflow's effective config as JSON (what the report rule passes)")
    parser.add_argument("--plots", type=Path, help="also write one PNG per figure into this folder")


def run(args: argparse.Namespace) -> int:
    from posbench.report import build_report

    try:
        config = (json.loads(args.config_json) if args.config_json is not None
                  else yaml.safe_load(args.config.read_text()) if args.config is not None else None)
    except (OSError, ValueError, yaml.YAMLError) as error:
        where = "argument --config-json" if args.config_json is not None else f"argument --config: {args.config}"
        print(f"posbench report: error: {where}: {str(error).splitlines()[0]}", file=sys.stderr)
        return 2
    if (arguments.without_rows(args.tables, "report") or arguments.unwritable("report", "--out", args.out)
            or arguments.unwritable("report", "--plots", args.plots, folder=True)):
        return 1
    pages = build_report(args.tables, args.out, config, args.plots)
    print(f"wrote {args.out} ({pages} pages)" + (f", figures under {args.plots}" if args.plots else ""))
    return 0

