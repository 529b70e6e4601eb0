"""The conda environment the rules name parses and pins what pyproject.toml pins."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def requirement_map(requirements):
    return {re.split(r"[=<>!~]", r, maxsplit=1)[0].strip().lower(): r.replace(" ", "") for r in requirements}


def test_conda_env_pins_the_package_versions():
    env = yaml.safe_load((ROOT / "envs" / "posbench.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda_pins = requirement_map(pip)
    package_pins = requirement_map(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    assert conda_pins == package_pins


def test_every_rule_file_names_an_existing_conda_env():
    for rules in (ROOT / "workflow" / "rules").glob("*.smk"):
        for env in re.findall(r'conda:\s*\n\s*"([^"]+)"', rules.read_text()):
            assert (rules.parent / env).resolve().is_file(), f"{rules.name} names missing {env}"
