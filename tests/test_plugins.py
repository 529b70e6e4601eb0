"""A user's own encoding, from the README's example, joins through the ``posbench.encodings`` entry
point: registered on import, trained and profiled by the CLI, its counts reconciled."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_plugin() -> str:
    """The Python block of the README's "Your own encoding, without a fork" section."""
    section = README.read_text().split("### Your own encoding, without a fork", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture
def installed_plugin(tmp_path):
    """The README's module and an installed distribution's metadata naming it in the entry-point group."""
    (tmp_path / "my_posbench_plugin.py").write_text(readme_plugin())
    info = tmp_path / "my_posbench_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-posbench-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text('[posbench.encodings]\npower_decay = my_posbench_plugin\n')
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}


def posbench(env, *argv):
    return subprocess.run([sys.executable, "-m", "posbench", *argv], env=env, capture_output=True, text=True,
                          timeout=600)


def test_a_plugin_encoding_trains_and_profiles(installed_plugin, tmp_path):
    trained = posbench(installed_plugin, "train", "--task", "reverse", "--encoding", "power_decay", "--steps", "5",
                       "--out", str(tmp_path / "train.json"))
    assert trained.returncode == 0, trained.stderr
    record = json.loads((tmp_path / "train.json").read_text())
    assert record["status"] == "ok" and record["params"]["position"] == 4  # tiny: one weight per head, 4 heads
    profiled = posbench(installed_plugin, "profile", "--encoding", "power_decay", "--size", "tiny", "--seq-len", "32",
                        "--min-repeats", "1", "--min-seconds", "0", "--warmup", "0", "--out", str(tmp_path / "p.json"))
    assert profiled.returncode == 0, profiled.stderr
    cost = json.loads((tmp_path / "p.json").read_text())
    assert cost["status"] == "ok" and cost["attention"]["path"] == "relative"
    assert cost["flops"]["analytic"] == cost["flops"]["fvcore"] == cost["flops"]["torch"]


def test_without_the_plugin_the_name_is_unknown(tmp_path):
    result = posbench(dict(os.environ), "train", "--task", "reverse", "--encoding", "power_decay", "--out",
                      str(tmp_path / "x.json"))
    assert result.returncode == 2 and "power_decay" in result.stderr and not (tmp_path / "x.json").exists()
