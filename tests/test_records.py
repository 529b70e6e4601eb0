"""The code hash that names the measuring code of a record: what changes it and what does not."""

import hashlib
import io
import json
import platform
import shutil
import tokenize

import jsonschema
import numpy
import pytest
import torch

from posbench import aggregate, machine, measuring_code, records


def package_copy(tmp_path, name="posbench"):
    """A copy of the real package's sources (no ``__pycache__``), to edit without touching the real ones."""
    return shutil.copytree(measuring_code.PACKAGE_DIR, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))


def edit(path, old, new):
    """Replace the one occurrence of ``old`` in the file at ``path``."""
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not once in {path.name}"
    path.write_text(text.replace(old, new))


def test_code_hash_is_a_sha256_stable_across_calls_and_equal_to_a_fresh_one_on_a_copy(tmp_path):
    first = measuring_code.code_hash()
    assert len(first) == 64 and set(first) <= set("0123456789abcdef")
    assert measuring_code.code_hash() == first and machine.environment()["code_hash"] == first
    assert measuring_code.code_hash(package_copy(tmp_path)) == first  # a path-independent hash of the same content


def test_code_hash_is_the_sha256_of_each_measuring_source_path_and_content(tmp_path):
    root = tmp_path / "pkg"
    (root / "schemas").mkdir(parents=True)
    (root / "b.py").write_bytes(b'"""A module."""\nx = 1  # one\n')
    (root / "schemas" / "a.schema.json").write_bytes(b'{"type": "object", "description": "prose"}')
    python, schema = b"NAME x\nOP =\nNUMBER 1\nNEWLINE \nENDMARKER ", b'{"type":"object"}'
    expected = hashlib.sha256(b"b.py\0" + str(len(python)).encode() + b"\0" + python
                              + b"schemas/a.schema.json\0" + str(len(schema)).encode() + b"\0" + schema).hexdigest()
    assert measuring_code.code_hash(root) == expected


def test_the_measuring_sources_are_the_packages_py_and_json_less_what_reads_records():
    sources = measuring_code.measuring_sources()
    assert sources == sorted(sources)
    assert {"records.py", "machine.py", "batch.py", "train.py", "checkpoints.py", "eval_scaling.py", "cli/train.py",
            "schemas/common.schema.json", "schemas/train.schema.json", "encodings/rope.py"} <= set(sources)
    assert not [name for name in sources if name.startswith(("report/", "bench")) or name in (
        "cli/report.py", "verdicts.py", "advise.py", "ranking.py", "aggregate.py", "evidence.py", "measuring_code.py",
        "shapes.py")]
    assert not [name for name in sources if "__pycache__" in name or not name.endswith((".py", ".json"))]
    assert "report/figures.py" in {p.relative_to(measuring_code.PACKAGE_DIR).as_posix()
                                   for p in measuring_code.PACKAGE_DIR.rglob("*.py")}


ROPE = ("encodings", "rope.py")


@pytest.mark.parametrize("change", [
    lambda root: edit(root.joinpath(*ROPE), "ROPE_BASE = 10000.0", "ROPE_BASE = 10001.0"),
    lambda root: edit(root.joinpath(*ROPE), "ROPE_BASE = 10000.0", "ROPE_BASE = 10000.0 + 0"),
    lambda root: edit(root.joinpath(*ROPE), "ROPE_BASE = 10000.0", "ROPE_BASE = 10000.0\nx = 1"),
    lambda root: edit(root.joinpath(*ROPE), "ROPE_BASE = 10000.0", 'ROPE_BASE = 10000.0\nX = "a" "b"'),
    lambda root: (root / "schemas" / "train.schema.json").write_text(
        (root / "schemas" / "train.schema.json").read_text().replace('"minimum": 1', '"minimum": 2', 1)),
    lambda root: (root / "tasks" / "extra.py").write_text("X = 1\n"),
    lambda root: (root / "flops.py").unlink(),
    lambda root: (root / "flops.py").rename(root / "flops2.py"),
], ids=["one-number", "one-more-token", "one-more-statement", "assigned-string", "schema-keyword",
        "added-module", "removed-module", "renamed-module"])
def test_code_hash_changes_with_one_token_of_a_measuring_source(tmp_path, change):
    before = measuring_code.code_hash(package_copy(tmp_path, "before"))
    edited = package_copy(tmp_path, "after")
    change(edited)
    assert measuring_code.code_hash(edited) != before


@pytest.mark.parametrize("change", [
    lambda root: edit(root.joinpath(*ROPE), '"""Rotary position embedding', '"""The rotary position embedding'),
    lambda root: edit(root.joinpath(*ROPE), '    """A scaling dict (or ``None``)', '    """A dict (or ``None``)'),
    lambda root: edit(root.joinpath(*ROPE), "ROPE_BASE = 10000.0", "ROPE_BASE = 10000.0  # RoFormer\n\n# prose\n"),
    lambda root: edit(root.joinpath(*ROPE), "ROPE_BASE = 10000.0", 'ROPE_BASE = 10000.0\n"""A note."""'),
    lambda root: edit(root.joinpath(*ROPE), "def frequencies(self, width: int, base: float,",
                      "def frequencies(self, width: int,\n                    base: float,"),
    lambda root: (root / "schemas" / "train.schema.json").write_text(
        (root / "schemas" / "train.schema.json").read_text().replace('"description": "Absent: cpu',
                                                                     '"description": "None: cpu')),
    lambda root: (root / "report" / "figures.py").write_text("# another report\n"),
    lambda root: (root / "report" / "extra.py").write_text("X = 1\n"),
    lambda root: (root / "verdicts.py").write_text("X = 1\n"),
    lambda root: (root / "cli" / "report.py").write_text((root / "cli" / "report.py").read_text() + "X = 1\n"),
    lambda root: (root / "NOTES.md").write_text("# a doc\n"),
    lambda root: (root / "schemas" / "README.txt").write_text("a note on the schemas\n"),
    lambda root: (root / "__pycache__").mkdir() or (root / "__pycache__" / "stale.py").write_text("X = 1\n"),
], ids=["module-docstring", "method-docstring", "comments-and-blank-lines", "string-statement", "line-breaks",
        "schema-description", "edited-report", "added-report-module", "judge-step", "edited-report-cli", "added-doc",
        "added-text", "pycache"])
def test_code_hash_does_not_change_with_prose_layout_the_report_or_docs(tmp_path, change):
    before = measuring_code.code_hash(package_copy(tmp_path, "before"))
    edited = package_copy(tmp_path, "after")
    change(edited)
    assert measuring_code.code_hash(edited) == before


def test_a_schema_property_named_description_is_content_not_prose():
    with_property = b'{"properties": {"description": {"type": "string"}}}'
    assert measuring_code.schema_content(with_property) == with_property.replace(b" ", b"")
    assert measuring_code.schema_content(b'{"properties": {"x": {"description": "prose", "type": "string"}}}') == \
        b'{"properties":{"x":{"type":"string"}}}'


def test_python_312_fstring_parts_hash_as_the_one_string_token_of_311(monkeypatch):
    """``x = f"{a}b"`` as Python 3.12 tokenizes it (FSTRING_START, the parts, FSTRING_END) gives the
    content 3.11 gives for its one STRING token."""
    start, end = 1001, 1002
    monkeypatch.setattr(measuring_code, "FSTRING_START", start)
    monkeypatch.setattr(measuring_code, "FSTRING_END", end)
    line = 'x = f"{a}b"\n'
    parts = [(tokenize.NAME, "x", 0, 1), (tokenize.OP, "=", 2, 3), (start, 'f"', 4, 6), (tokenize.OP, "{", 6, 7),
             (tokenize.NAME, "a", 7, 8), (tokenize.OP, "}", 8, 9), (1003, "b", 9, 10), (end, '"', 10, 11),
             (tokenize.NEWLINE, "\n", 11, 12)]
    tokens_312 = [tokenize.TokenInfo(kind, text, (1, a), (1, b), line) for kind, text, a, b in parts]
    joined = list(measuring_code._joined_fstrings(iter(tokens_312), [line]))
    tokens_311 = list(tokenize.generate_tokens(io.StringIO(line).readline))[:4]
    assert [(t.type, t.string) for t in joined] == [(t.type, t.string) for t in tokens_311]


def test_a_new_record_needs_a_code_hash_an_old_one_may_lack_it():
    common = json.loads((records.SCHEMA_DIR / "common.schema.json").read_text())
    record = machine.new_record("probe", {})
    assert record["schema_version"] == 2 and record["environment"]["code_hash"] == measuring_code.code_hash()
    jsonschema.validate(record, common)
    environment = {key: value for key, value in record["environment"].items() if key != "code_hash"}
    with pytest.raises(jsonschema.ValidationError, match="'code_hash' is a required property"):
        jsonschema.validate({**record, "environment": environment}, common)
    jsonschema.validate({**record, "schema_version": 1, "environment": environment}, common)
    with pytest.raises(jsonschema.ValidationError, match="does not match"):
        jsonschema.validate({**record, "environment": {**environment, "code_hash": "abc"}}, common)


def test_the_environment_names_the_machine_posbench_machine_gives_and_the_package_versions(monkeypatch):
    monkeypatch.setenv("POSBENCH_MACHINE", "node-7")
    env = machine.environment()
    assert env["machine"] == "node-7"
    assert sorted(env["packages"]) == ["fvcore", "numpy", "nvidia-ml-py", "posbench", "torch"]
    assert (env["packages"]["torch"], env["packages"]["numpy"]) == (torch.__version__, numpy.__version__)
    monkeypatch.delenv("POSBENCH_MACHINE")
    assert machine.environment()["machine"] == platform.node()


XEON_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 167
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu sse2 avx avx2 avx512f avx512bw

processor\t: 1
model name\t: another
"""


def test_a_record_names_its_cpu_by_model_family_and_vector_unit_from_the_first_processor():
    assert machine.cpu_name(XEON_CPUINFO) == "Intel(R) Xeon(R) Processor (family 6, model 167, AVX-512)"
    zen3 = "cpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: sse2 avx2 fma\n"
    assert machine.cpu_name(zen3) == "AMD EPYC (family 25, model 1, AVX2)"
    assert machine.cpu_name("model name\t: Some Arm core\n") == "Some Arm core"  # nothing more to name
    with pytest.raises(ValueError):
        machine.cpu_name("processor\t: 0\n")


def test_the_tables_name_every_cpu_a_machine_label_measured_on_with_its_records():
    """A VM's host name can outlive its CPU (a scale part resumed on another machine): meta.json's environment
    for the label keeps its first record's fields and names each CPU with its count; one CPU stays as it is."""
    def record(machine_label: str, cpu: str) -> dict:
        return {"environment": {"machine": machine_label, "cpu": cpu, "cpu_count": 2}}

    found = [record("vm", "Intel Xeon"), record("vm", "AMD EPYC"), record("vm", "AMD EPYC"), record("box", "Arm")]
    environments = aggregate.machine_environments(found)
    assert environments["vm"] == {"machine": "vm", "cpu": "AMD EPYC (2 records); Intel Xeon (1 record)",
                                  "cpu_count": 2}
    assert environments["box"]["cpu"] == "Arm"
    assert found[0]["environment"]["cpu"] == "Intel Xeon"  # the records themselves are left as they were


# ----- the record files: fixture-free pieces (a real profile run is ~27 s, too slow for mutation testing) ----
def test_write_json_makes_the_folders_and_writes_through_one_hidden_temporary_beside_the_file(tmp_path, monkeypatch):
    path = tmp_path / "a" / "b" / "x.json"  # neither folder exists yet
    seen = []
    real = records.write_atomically

    def spying(target, write):
        def spy(file):
            seen.extend(p.name for p in target.parent.iterdir())
            return write(file)
        return real(target, spy)

    monkeypatch.setattr(records, "write_atomically", spying)
    assert records.write_json(path, {"b": 1, "a": [1, 2]}) == path
    assert path.read_text() == '{\n "a": [\n  1,\n  2\n ],\n "b": 1\n}\n'  # indent 1, sorted keys, final newline
    (temporary,) = seen
    assert temporary.startswith(".x.json.") and temporary.endswith(".tmp")
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]


def test_config_hash_is_the_first_16_hex_of_the_sorted_json_and_reads_paths_as_text():
    from pathlib import Path

    expected = hashlib.sha256(b'{"a": 1, "path": "runs/x"}').hexdigest()[:16]
    assert records.config_hash({"path": "runs/x", "a": 1}) == expected
    assert records.config_hash({"path": Path("runs/x"), "a": 1}) == expected


def test_a_new_record_has_no_reason_and_the_hash_of_its_config():
    record = machine.new_record("profile", {"seq_len": 64})
    assert (record["kind"], record["status"], record["reason"]) == ("profile", "ok", "")
    assert record["config_hash"] == records.config_hash({"seq_len": 64})
    assert record["environment"]["cpu_count"] == __import__("os").cpu_count()


def test_the_environment_names_the_gpu_and_cuda_where_there_is_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args: "Test GPU 80GB")
    monkeypatch.setattr(torch.version, "cuda", "12.9")
    env = machine.environment()
    assert (env["gpu"], env["cuda"]) == ("Test GPU 80GB", "12.9")


def test_a_package_without_metadata_reports_its_modules_version(monkeypatch):
    import sys
    from types import SimpleNamespace

    monkeypatch.setitem(sys.modules, "posbench_test_only_module", SimpleNamespace(__version__="9.9.1"))
    assert machine._version("posbench_test_only_module") == "9.9.1"
    assert machine._version("posbench_not_a_module_at_all") is None


def test_validate_names_a_missing_or_unknown_kind():
    with pytest.raises(jsonschema.ValidationError, match="^record has no 'kind'$"):
        records.validate({"status": "ok"})
    with pytest.raises(ValueError, match=r"^unknown record kind 'nope'; allowed: advice, probe, profile, train$"):
        records.validate({"kind": "nope"})


def test_items_are_digested_written_beside_the_record_and_read_back(tmp_path):
    columns = {"item": numpy.array([0, 1, 2], dtype="<i8"), "exact": numpy.array([1.0, 0.0, 1.0])}
    digest = hashlib.sha256(b"item:<i8:(3,);" + columns["item"].tobytes()
                            + b"exact:<f8:(3,);" + columns["exact"].tobytes()).hexdigest()
    items = records.Items(columns)
    assert dict(items) == {"rows": 3, "columns": ["item", "exact"], "sha256": digest}
    assert records.content_digest({"item": columns["item"].astype("<i4")}) != records.content_digest(
        {"item": columns["item"]})  # the type counts, not only the values
    with pytest.raises(ValueError, match=r"^item columns differ in length: \[2, 3\]$"):
        records.Items({"a": [1, 2], "b": [1, 2, 3]})
    record_path = tmp_path / "cell.json"
    assert records.items_path(record_path) == tmp_path / "cell.items.npz"
    records.write_atomically(records.items_path(record_path), lambda file: numpy.savez_compressed(file, **columns))
    record = {"items": dict(items)}
    found = records.read_items(record_path, record)
    assert list(found) == ["item", "exact"] and all(numpy.array_equal(found[k], columns[k]) for k in columns)
    with pytest.raises(ValueError, match=r"^items of .*cell\.json: cell\.items\.npz holds other items than the "
                                         r"record names$"):
        records.read_items(record_path, {"items": {**record["items"], "sha256": "0" * 64}})
    with pytest.raises(ValueError, match=r"cell\.items\.npz unreadable \(KeyError: "):
        records.read_items(record_path, {"items": {**record["items"], "columns": ["item", "absent"]}})
    with pytest.raises(ValueError, match=r"^items of .*other\.json: other\.items\.npz unreadable \(FileNotFoundError"):
        records.read_items(tmp_path / "other.json", record)


def test_validate_checks_the_record_itself_against_its_kinds_schema():
    with pytest.raises(jsonschema.ValidationError, match="is a required property"):
        records.validate({"kind": "profile"})


def test_items_holding_python_objects_are_refused_unread(tmp_path):
    record_path = tmp_path / "cell.json"
    objects = numpy.array([{"a": 1}, None], dtype=object)
    records.write_atomically(records.items_path(record_path), lambda file: numpy.savez(file, item=objects))
    record = {"items": {"rows": 2, "columns": ["item"], "sha256": records.content_digest({"item": objects})}}
    with pytest.raises(ValueError, match=r"cell\.items\.npz unreadable \(ValueError: Object arrays cannot be loaded"):
        records.read_items(record_path, record)


def test_config_fields_leave_out_added_fields_only_at_their_defaults():
    from dataclasses import dataclass

    @dataclass
    class Config:
        seed: int = 0
        steps: int = 100
        scaling: str = "none"

    assert records.config_fields(Config(seed=3), ("scaling",)) == {"seed": 3, "steps": 100}
    assert records.config_fields(Config(scaling="ntk"), ("scaling",)) == {"seed": 0, "steps": 100, "scaling": "ntk"}
    assert records.config_fields(Config(), ()) == {"seed": 0, "steps": 100, "scaling": "none"}
    assert records.config_fields(Config(steps=100), ("steps", "scaling")) == {"seed": 0}


def small_record(items=None) -> dict:
    """A valid record without a run: a probe cell that ended in an error."""
    config = dict(encoding="sinusoidal", d_model=16, vocab=11, seq_len=8, seed=0, embedding="random", train_steps=0,
                  train_layers=0, max_pairs=10, test_fraction=0.2, validation_fraction=0.2, probe_iterations=5,
                  mlp_hidden=4, variance_kept=0.9, threads=1)
    record = machine.new_record("probe", config, status="error", reason="test only")
    record.update(encoding="sinusoidal", d_model=16, seq_len=8, seed=0, recovery=[], wall_time_s={"total": 0.5})
    if items is not None:
        record["items"] = items
    return record


def test_write_record_validates_writes_items_first_and_reads_back(tmp_path):
    record = small_record()
    path = records.write_record(tmp_path / "runs" / "cell.json", record)
    assert path == tmp_path / "runs" / "cell.json" and records.read_record(path) == record
    assert json.loads(path.read_text()) == record and sorted(p.name for p in path.parent.iterdir()) == ["cell.json"]
    columns = {"item": numpy.arange(4), "exact": numpy.array([1, 0, 1, 1])}
    with_items = small_record(records.Items(columns))
    records.write_record(path, with_items)
    assert sorted(p.name for p in path.parent.iterdir()) == ["cell.items.npz", "cell.json"]
    back = records.read_record(path)
    assert back["items"] == dict(with_items["items"])
    assert all(numpy.array_equal(records.read_items(path, back)[k], v) for k, v in columns.items())
    bad = {**record, "status": "finished"}
    with pytest.raises(jsonschema.ValidationError, match="'finished' is not one of"):
        records.write_record(tmp_path / "bad.json", bad)
    assert not (tmp_path / "bad.json").exists()
    path.write_text(json.dumps(bad))
    with pytest.raises(jsonschema.ValidationError, match="'finished' is not one of"):
        records.read_record(path)
