"""A user's own encoding, from the README's example, joins through the ``posbench.encodings`` entry
point: registered on import, trained and profiled by the CLI, its counts reconciled. An encoding or a task
is one file: found by walking the package or through its entry-point group, then known to the registries and
the workflow's config check alike."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_plugin() -> str:
    """The Python block of the README's "Your own encoding or task, without a fork" section."""
    section = README.read_text().split("### Your own encoding or task, without a fork", 1)[1]
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


THROWAWAY_ENCODING = '''
from posbench.encodings import PositionalEncoding, register


class Throwaway(PositionalEncoding):
    """No position: the base class's hooks, under a name of its own."""


register("throwaway_encoding")(Throwaway)
'''

THROWAWAY_TASK = '''
from dataclasses import dataclass

from posbench.tasks import register
from posbench.tasks.copy import Copy


@register("throwaway_task")
@dataclass(frozen=True)
class ThrowawayTask(Copy):
    """copy at half its default length."""

    train_length: int = 8
'''

SEEN = '''
import json

from posbench import encodings, tasks
from posbench.workflow import ConfigError
from posbench.workflow_config import validate_config


def refusal(train_tasks):
    try:
        validate_config({"train": {"tasks": train_tasks, "seeds": [0]}})
    except ConfigError as error:
        return str(error)


listed = {"train": {"tasks": {"throwaway_task": ["throwaway_encoding", "rope"]}, "seeds": [0]},
          "profile": {"encodings": ["throwaway_encoding"], "sizes": ["tiny"], "seq_lens": [64]}}
try:
    accepted = "throwaway_task" in validate_config(listed)["train"]["tasks"]
except ConfigError:
    accepted = False
print(json.dumps({"encodings": encodings.names(), "tasks": tasks.names(), "accepted": accepted,
                  "no_task": refusal({"no_task": ["rope"]}), "no_encoding": refusal({"copy": ["no_encoding"]})}))
'''


def seen_by_posbench(env) -> dict:
    """What a fresh interpreter's registries hold, and what the workflow's config check accepts and allows."""
    run = subprocess.run([sys.executable, "-c", SEEN], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_one_file_adds_an_encoding_and_one_a_task_through_their_entry_point_groups(tmp_path):
    (tmp_path / "throwaway_encoding.py").write_text(THROWAWAY_ENCODING)
    (tmp_path / "throwaway_task.py").write_text(THROWAWAY_TASK)
    info = tmp_path / "throwaway-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: throwaway\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[posbench.encodings]\nthrowaway = throwaway_encoding\n\n"
                                           "[posbench.tasks]\nthrowaway = throwaway_task\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    seen = seen_by_posbench(env)
    assert "throwaway_encoding" in seen["encodings"] and "throwaway_task" in seen["tasks"] and seen["accepted"]
    assert seen["no_task"] == ("config key 'train.tasks.no_task': unknown 'no_task'; allowed: "
                               f"{', '.join(seen['tasks'])}")
    assert seen["no_encoding"] == ("config key 'train.tasks.copy[0]': unknown 'no_encoding'; allowed: "
                                   f"{', '.join(seen['encodings'])}")
    (info / "entry_points.txt").write_text("")  # the same files, named by no entry point: not registered
    unlisted = seen_by_posbench(env)
    assert set(seen["encodings"]) - set(unlisted["encodings"]) == {"throwaway_encoding"}
    assert set(seen["tasks"]) - set(unlisted["tasks"]) == {"throwaway_task"} and not unlisted["accepted"]


def test_discovery_imports_every_module_of_the_package_and_names_the_allowed(tmp_path, monkeypatch):
    from posbench.registry import Registry

    package = tmp_path / "throwaway_widgets"
    (package / "more").mkdir(parents=True)
    (package / "__init__.py").write_text("from posbench.registry import Registry\n\n"
                                         "WIDGETS = Registry('widget', 'throwaway_widgets.plugins')\n")
    for module, name in (("a.py", "round"), ("b.py", "square"), ("more/__init__.py", None), ("more/c.py", "oval")):
        (package / module).write_text(f"from throwaway_widgets import WIDGETS\n\nWIDGETS.add({name!r}, 1)\n"
                                      if name else "")
    monkeypatch.syspath_prepend(str(tmp_path))
    import throwaway_widgets

    widgets = throwaway_widgets.WIDGETS
    assert isinstance(widgets, Registry) and widgets.names() == []
    widgets.discover("throwaway_widgets")
    assert widgets.names() == ["oval", "round", "square"] and widgets.entry("oval") == 1
    with pytest.raises(ValueError) as error:
        widgets.entry("hexagon")
    assert str(error.value) == "unknown widget 'hexagon'; allowed: oval, round, square"
    with pytest.raises(ValueError) as error:
        widgets.add("round", 2)
    assert str(error.value) == "widget 'round' is registered twice"
