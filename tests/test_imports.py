"""The package's import graph, drawn from the source (every ``import`` statement, module-level or inside a
function): no cycles, and no module importing one of a later stage (:data:`STAGES`: the core of positions,
encodings, attention and model → run → aggregate → judge → report), so each stage can be read, tested and rerun
knowing only what lies below it."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "posbench"

# The stages, lowest first. A module may import its own stage's modules and earlier stages', never a later
# one's. A name stands for the module and every module below it (``encodings``: the package and its modules).
STAGES = {
    # what every stage reads: positions, the cache, sizes, devices, record files, metric names, the statistics
    "base": ("positions", "cache", "sizes", "devices", "faults", "metrics", "measuring_code", "records", "machine",
             "profiler", "schedule", "guidance", "registry", "statistics"),
    "encodings": ("encodings", "eval_scaling"),
    "tasks": ("tasks",),
    "attention": ("attention",),
    "model": ("model", "flops", "footprint"),
    # the declared comparisons: which arms each stage trains, tunes, judges and draws
    "declarations": ("comparisons",),
    "run": ("train", "checkpoints", "evaluation", "loss_trend", "free_running", "profile", "probe", "measure", "tune",
            "bench"),
    "aggregate": ("aggregate", "analytic", "tables", "experiments"),
    "judge": ("judge", "arms", "evidence", "trajectories", "ledger", "axis_check", "arm_rule", "claims", "shapes",
              "verdicts", "advise", "ranking", "advice_situations", "projection", "projection_check", "across_sizes"),
    "report": ("report",),
    # what runs the stages: the command line and the workflow may import any of them
    "orchestration": ("__init__", "__main__", "cli", "batch", "workflow", "workflow_config", "workflow_paths"),
}


def modules_of(package: Path) -> dict[str, Path]:
    """Each module's dotted name -> its file."""
    def name(path: Path) -> str:
        parts = (package.name, *path.relative_to(package).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    return {name(path): path for path in sorted(package.rglob("*.py"))}


MODULES = modules_of(PACKAGE)


def containing_module(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ``modules`` that ``name`` lives in (``posbench.sizes.SIZES`` -> ``posbench.sizes``), or
    ``None`` (outside the package)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imported_modules(name: str, modules: dict[str, Path]) -> set[str]:
    """The modules ``name`` imports anywhere in its source, relative imports resolved; a package importing
    its own modules is not an arrow (it holds them)."""
    path = modules[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {containing_module(alias.name, modules) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            parent = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]) if node.level else ""
            source = ".".join(part for part in (parent, node.module) if part)
            found |= {containing_module(f"{source}.{alias.name}", modules) for alias in node.names}
    return {module for module in found if module and module != name and not module.startswith(f"{name}.")}


GRAPH = {name: imported_modules(name, MODULES) for name in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def stage_of(name: str) -> str | None:
    relative = name.removeprefix("posbench").removeprefix(".") or "__init__"
    for stage, prefixes in STAGES.items():
        if any(relative == prefix or relative.startswith(f"{prefix}.") for prefix in prefixes):
            return stage
    return None


def test_the_package_has_no_import_cycle():
    assert cycles(GRAPH) == []


def test_cycles_are_found_where_they_are():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_function_level_relative_and_package_imports_are_arrows(tmp_path):
    package = tmp_path / "posbench"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from posbench.low import f\n")  # a package's own module: no arrow
    (package / "low.py").write_text("import numpy\n\ndef f():\n    from posbench.sub.high import g\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "high.py").write_text("from ..low import f\nfrom posbench import sub\nfrom . import low\n")
    modules = modules_of(package)
    assert imported_modules("posbench", modules) == set()
    assert imported_modules("posbench.low", modules) == {"posbench.sub.high"}
    assert imported_modules("posbench.sub.high", modules) == {"posbench.low", "posbench.sub"}


def test_every_module_has_a_stage():
    assert [name for name in MODULES if stage_of(name) is None] == [], "add each new module to STAGES"


# Upward arrows still to remove, each with the import that makes it: the test expects them to fail, so one that
# is gone must leave this list too.
UPWARD: dict[str, str] = {}


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.xfail(reason=UPWARD[name], strict=True))
                                  if name in UPWARD else name for name in sorted(MODULES)])
def test_no_module_imports_a_later_stage(name):
    order = list(STAGES)
    later = {target: stage_of(target) for target in GRAPH[name]
             if stage_of(target) and order.index(stage_of(target)) > order.index(stage_of(name) or order[-1])}
    assert later == {}, f"{name} ({stage_of(name)}) imports a later stage"
