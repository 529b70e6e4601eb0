"""One vocabulary of devices and dtypes: each name a constant of posbench.devices, spelled nowhere else in
the package, and the schemas (which cannot import it) spelling exactly its names."""

import ast
import json
from pathlib import Path

import pytest
import torch
import yaml

from posbench import devices
from posbench.devices import (
    ANY_DEVICE,
    BFLOAT16,
    CPU,
    CUDA,
    FLOAT16,
    FLOAT32,
    MPS,
    TORCH_DTYPES,
    TRAINING_DEVICES,
    TRAINING_DTYPES,
)

PACKAGE = Path(devices.__file__).parent
ROOT = PACKAGE.parent
RETIRED = ("fp32", "bf16", "fp16")  # train's and probe's former spellings, refused since
NAMES = {CPU, CUDA, MPS, *TORCH_DTYPES, *RETIRED}


def spelled_names(source: str) -> list[tuple[int, str]]:
    """(line, name) of each string literal in ``source`` that is a device or dtype name, except where it
    names a field of a record or mapping that shares a device's spelling (the environment's ``cpu`` model
    and ``cuda`` version, a memory section's ``cpu``): a dict key, a subscript, ``.get``'s key, or an
    item of a ``*_KEYS`` tuple."""
    tree = ast.parse(source)
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            parts = [key for key in node.keys if key is not None]
        elif isinstance(node, ast.Subscript):
            parts = [node.slice]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            parts = node.args[:1]
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.endswith("_KEYS")
                                                    for t in node.targets):
            parts = [node.value]
        else:
            continue
        keys.update(id(inner) for part in parts for inner in ast.walk(part))
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and node.value in NAMES and id(node) not in keys)


def test_the_scan_finds_a_spelled_name_and_passes_a_field_of_that_spelling():
    source = ('x = "cuda"\nif device.type == "cpu":\n    pass\nm = memory["cpu"]\n'
              'n = env.get("cuda" if on else "cpu")\nd = {"cuda": 1}\nENVIRONMENT_KEYS = ("cpu", "gpu")\nt = "bf16"\n'
              'u = f"{kind}:N"\nv = ["mps", "float16"]\n')
    assert spelled_names(source) == [(1, "cuda"), (2, "cpu"), (8, "bf16"), (10, "float16"), (10, "mps")]


def test_no_module_but_devices_spells_a_device_or_dtype_name():
    found = {str(path.relative_to(ROOT)): spelled_names(path.read_text()) for path in sorted(PACKAGE.rglob("*.py"))
             if path.name != "devices.py"}
    assert {path: names for path, names in found.items() if names} == {}
    assert len(found) > 60  # every module of the package was read


def test_each_name_is_one_constant():
    assert [CPU, CUDA, MPS] == list(ANY_DEVICE.kinds) and len(set(ANY_DEVICE.kinds)) == 3
    assert list(TORCH_DTYPES) == [FLOAT32, BFLOAT16, FLOAT16]
    assert TORCH_DTYPES == {FLOAT32: torch.float32, BFLOAT16: torch.bfloat16, FLOAT16: torch.float16}
    assert TRAINING_DTYPES == (FLOAT32, BFLOAT16) and TRAINING_DEVICES.kinds == (CPU, CUDA)
    assert ANY_DEVICE.allowed == "cpu, cuda, cuda:N, mps" and TRAINING_DEVICES.allowed == "cpu, cuda, cuda:N"


@pytest.mark.parametrize("device, anywhere, training", [
    ("cpu", True, True), ("cuda", True, True), ("cuda:0", True, True), ("cuda:12", True, True), ("mps", True, False),
    ("cuda:", False, False), ("cuda:x", False, False), ("tpu", False, False), ("cpu:0", False, False),
    ("CUDA", False, False), (None, False, False), (0, False, False)])
def test_which_devices_each_command_takes(device, anywhere, training):
    assert (device in ANY_DEVICE, device in TRAINING_DEVICES) == (anywhere, training)


def config_schema() -> dict:
    return yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())["properties"]


def record_schema(kind: str) -> dict:
    return json.loads((PACKAGE / "schemas" / f"{kind}.schema.json").read_text())["properties"]


def test_the_schemas_spell_exactly_the_constants():
    """What a config, record or advice may hold is what the commands take, in the same words."""
    config = config_schema()
    assert config["devices"]["oneOf"][1]["items"]["pattern"] == f"^({ANY_DEVICE.regex})$"
    assert (config["profile"]["properties"]["dtype"]["enum"], config["profile"]["properties"]["dtype"]["default"]
            ) == (list(TORCH_DTYPES), FLOAT32)
    train = config["train"]["properties"]
    assert (train["device"]["pattern"], train["device"]["default"]) == (f"^({TRAINING_DEVICES.regex})$", CPU)
    assert (train["dtype"]["enum"], train["dtype"]["default"]) == (list(TRAINING_DTYPES), FLOAT32)
    profile = record_schema("profile")["config"]["properties"]
    assert (profile["device"]["pattern"], profile["dtype"]["enum"]) == (f"^({ANY_DEVICE.regex})$", list(TORCH_DTYPES))
    for kind in ("train", "probe"):
        run = record_schema(kind)["config"]["properties"]
        assert (run["device"]["pattern"], run["dtype"]["enum"]) == (f"^({TRAINING_DEVICES.regex})$",
                                                                      list(TRAINING_DTYPES))
    assert record_schema("advice")["situation"]["properties"]["device"]["enum"] == list(ANY_DEVICE.kinds)


def test_cpu_is_always_there_and_a_missing_gpu_says_why():
    assert devices.missing_device(CPU) is None
    kept, dropped = devices.present()
    assert kept[0] == CPU and len(kept) + len(dropped) == 3
    beyond = f"cuda:{torch.cuda.device_count()}"
    reason = devices.missing_device(beyond)
    assert reason.startswith(f"{beyond} does not exist" if torch.cuda.is_available() else "no CUDA device visible")
    assert devices.on_cuda("cuda:1") and devices.on_cuda(torch.device("cuda")) and not devices.on_cuda(CPU)


def test_autocast_below_float32_only():
    a = torch.ones(4, 4)
    with devices.autocast(torch.device(CPU), BFLOAT16):
        assert (a @ a).dtype == torch.bfloat16
    with devices.autocast(torch.device(CPU), FLOAT32):
        assert (a @ a).dtype == torch.float32 and not torch.is_autocast_enabled(CPU)
