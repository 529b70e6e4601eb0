"""Pre-registration kept honest: the commit that declared each comparison, records older than it named,
and the verdict ledger against a previous run."""

from __future__ import annotations

import shutil
import subprocess

import pandas as pd
import pytest

from posbench import comparisons, guidance, ledger
from posbench import verdicts as judge


def git(folder, *arguments) -> str:
    return subprocess.run(["git", *arguments], cwd=folder, check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}).stdout.strip()


@pytest.fixture
def repository(tmp_path):
    """A git repository holding a copy of comparisons.yaml, committed, then scan-rope's budget changed and
    committed again: (folder, the first commit, the second)."""
    git(tmp_path, "init", "-q")
    path = tmp_path / "comparisons.yaml"
    shutil.copy(comparisons.PATH, path)
    git(tmp_path, "add", "comparisons.yaml")
    git(tmp_path, "commit", "-qm", "declare")
    first = git(tmp_path, "rev-parse", "HEAD")
    path.write_text(path.read_text().replace("steps: 3200}", "steps: 6400}"))
    git(tmp_path, "commit", "-qam", "a longer budget for scan-rope")
    return tmp_path, first, git(tmp_path, "rev-parse", "HEAD")


def test_each_comparison_is_declared_by_the_newest_commit_of_its_entry(repository):
    folder, first, second = repository
    commits = comparisons.declaring_commits(folder / "comparisons.yaml")
    assert commits["scan-rope"] == second and commits["prose-rope"] == first
    assert set(commits) == {c.id for c in comparisons.load().comparisons}
    (folder / "comparisons.yaml").write_text((folder / "comparisons.yaml").read_text().replace(
        "margin: 0.05, reference_spread: 0.022", "margin: 0.06, reference_spread: 0.022"))
    assert comparisons.declaring_commits(folder / "comparisons.yaml")["prose-rope"] == comparisons.UNCOMMITTED


def test_records_older_than_their_declaration_are_named(repository, monkeypatch):
    folder, first, second = repository
    monkeypatch.setattr(comparisons, "PATH", folder / "comparisons.yaml")
    assert judge.measured_before(second, {first, second}) == [first]  # the record of the first commit predates
    assert judge.measured_before(first, {first}) == []
    assert judge.measured_before(comparisons.UNCOMMITTED, {first}) == []  # not committed: cannot tell
    scan = comparisons.load(folder / "comparisons.yaml").by_id["scan-rope"]
    results = pd.DataFrame([{"task": "scan", "encoding": e, "size": "tiny", "seed": seed, "steps": 6400,
                             "git_commit": commit} for e in ("sinusoidal", "rope")
                            for seed, commit in ((100, first), (101, second), (0, "pilot"))])
    assert judge.records_of(results, scan, "tiny", 1) == {first, second}  # seed 0 is no deciding seed


def verdict_rows(comparison: str, verdict: str, effect: float, steps: float, n: int, sha: str,
                 rates: tuple[float, float] = (0.003, 0.003)) -> dict:
    return {"row": "standard_nlp", "comparison": comparison, "decides": True, "row_shown": verdict, "effect": effect,
            "ci_low": effect - 0.05, "ci_high": effect + 0.05, "margin": 0.1, "n_added": n, "n_comparator": n,
            "steps": steps, "declaration_sha256": sha, "lr_added": rates[0], "lr_comparator": rates[1]}


def test_the_ledger_says_what_changed_between_two_runs():
    before = pd.DataFrame([verdict_rows("scan-rope", "unstable (not supported in 88% of seed resamples)", 0.230,
                                        float("nan"), 10, "a" * 64)])
    after = pd.DataFrame([verdict_rows("scan-rope", "supported", 0.006, 3200, 7, "b" * 64, rates=(0.009, 0.027))])
    table = ledger.table(before, after, {"code_hashes": ["1" * 64]}, {"code_hashes": ["2" * 64]})
    assert table["row"].tolist() == [row.key for row in guidance.ROWS]
    first = table.iloc[0]
    assert (first["previous_verdict"], first["verdict"]) == ("unstable (not supported in 88% of seed resamples)",
                                                            "supported")
    assert first["previous_effect"] == "+0.230 [+0.180, +0.280] vs δ 0.1 (10/10 seeds)"
    assert first["changed"] == ("steps not recorded -> 3200; seeds per arm 10 -> 7; learning rates (added/comparator) "
                                "0.003/0.003 -> 0.009/0.027; declarations aaaaaaaaaaaa -> bbbbbbbbbbbb; measuring code "
                                "111111111111 -> 222222222222")
    assert table.iloc[1]["changed"] == "measuring code 111111111111 -> 222222222222"  # no comparison either side
    other = pd.DataFrame([verdict_rows("babi-rope", "supported", 0.01, 3200, 7, "b" * 64)])
    assert ledger.table(after, other, {}, {}).iloc[0]["changed"].startswith(
        "decided by babi-rope instead of scan-rope")


def test_the_ledger_names_the_text_a_row_was_trained_on_when_it_changed():
    """A verdict from before lm_prose read the English corpus has no text recorded; the new one names it."""
    before = pd.DataFrame([verdict_rows("prose-rope-L128", "supported", 0.0, 2000, 7, "a" * 64)])
    after = pd.DataFrame([{**verdict_rows("prose-rope-L128", "supported", 0.01, 2000, 7, "a" * 64),
                           "text": "wikipedia"}])
    assert ledger.table(before, after, {}, {}).iloc[0]["changed"] == "training text not recorded -> wikipedia"
    assert ledger.table(after, after, {}, {}).iloc[0]["changed"] == "nothing"  # the same text: nothing to say
