"""The user documents' figures and example outputs are what the commands print now: each generated block
of README.md, docs/*.md and results/reference/README.md equals a fresh rendering by
``scripts/render_docs.py`` (the real commands run on the committed reference), and the README stays short."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("render_docs", ROOT / "scripts/render_docs.py")
render_docs = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(render_docs)


def test_every_generated_block_is_what_the_commands_print_now():
    stale = render_docs.stale(render_docs.documents())
    assert not stale, f"stale generated blocks (run: .venv/bin/python scripts/render_docs.py): {stale}"


def test_every_block_name_in_the_documents_has_a_generator_and_every_generator_is_used():
    used = {m["name"] for path in render_docs.documents() for m in render_docs.BLOCK.finditer(path.read_text())}
    assert used == set(render_docs.BLOCKS)


def test_a_changed_output_is_found_stale_and_rendering_restores_it(tmp_path):
    document = tmp_path / "doc.md"
    document.write_text("intro\n<!-- begin: scale -->\nan old figure\n<!-- end: scale -->\nafter\n")
    assert render_docs.stale([document]) == [f"{document}: scale"]
    assert render_docs.render([document]) == [document]
    assert render_docs.stale([document]) == [] and render_docs.render([document]) == []  # idempotent
    text = document.read_text()
    assert text.startswith("intro\n<!-- begin: scale -->\n**Scale.**") and text.endswith("<!-- end: scale -->\nafter\n")


def test_an_unknown_block_name_is_refused_with_the_file_and_the_known_names(tmp_path):
    document = tmp_path / "doc.md"
    document.write_text("<!-- begin: nonsense -->\n<!-- end: nonsense -->\n")
    with pytest.raises(SystemExit, match="doc.md: unknown block 'nonsense'; known: findings"):
        render_docs.stale([document])


def test_the_schedule_is_bounded_by_the_longest_job_and_by_the_work_per_core():
    jobs = [7.0, 5.0, 4.0, 3.0, 3.0]
    assert render_docs.schedule(jobs, 1) == 22.0
    assert render_docs.schedule(jobs, 2) == 12.0  # longest first: 7+3 | 5+4+3
    assert render_docs.schedule(jobs, 10) == 7.0


def test_the_readme_and_the_references_index_stay_short():
    assert len((ROOT / "README.md").read_bytes()) <= 13 * 1024  # 1 KiB of it the verdicts at three sizes
    assert len((ROOT / "results/reference/README.md").read_bytes()) <= 3 * 1024
