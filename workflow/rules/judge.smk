# The tables -> the judge step's CSVs beside them (verdicts, trajectory, ledger against previous_reference, claims,
# advice, axes, shapes, projection, scale; nothing re-measured): what the report and `posbench advise` read.
# `snakemake results/tables/verdicts.csv` runs it without the PDF.
from pathlib import Path

from posbench.tables import JUDGED_NAMES

JUDGED = expand(f"{RESULTS}/tables/{{table}}.csv", table=JUDGED_NAMES)


rule judge:
    input:
        TABLES,
    output:
        JUDGED,
    log:
        f"{RESULTS}/logs/judge.log",
    conda:
        "../../envs/posbench.yaml"
    params:
        py=PY,
        tables=lambda wildcards, output: Path(output[0]).parent,
        preset=config["preset"],
        previous=(
            f"--previous {config['previous_reference']}"
            if config["previous_reference"]
            else ""
        ),
    message:
        "judge {RESULTS}/tables -> " + ", ".join(f"{name}.csv" for name in JUDGED_NAMES)
    shell:
        "{params.py} -m posbench judge --tables {params.tables} --preset {params.preset:q} {params.previous}"
        " > {log} 2>&1"
