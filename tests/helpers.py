"""What a finished run of a config leaves under ``results/records/`` (one record per cell), and the
shipped declaration's rules for a file of planted comparisons."""

import yaml

from posbench import comparisons
from posbench import workflow as pw
from posbench import workflow_paths as paths


def profile_records(config: dict, devices: list[str]) -> list[str]:
    return pw.cell_paths(paths.PROFILE_RECORD, config, pw.profile_cells(config, devices))


def train_records(config: dict) -> list[str]:
    return pw.cell_paths(paths.TRAIN_RECORD, config, pw.train_cells(config))


def probe_records(config: dict) -> list[str]:
    return pw.cell_paths(paths.PROBE_RECORD, config, pw.probe_cells(config))


def declared_rules() -> dict:
    """The shipped ``comparisons.yaml``'s seed, budget and trend rules: what a file of planted comparisons needs."""
    return {key: yaml.safe_load(comparisons.PATH.read_text())[key] for key in ("seeds", "budgets", "trend")}
