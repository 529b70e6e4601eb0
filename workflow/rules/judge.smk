# The tables -> verdicts.csv, claims.csv, advice.csv and axes.csv beside them (nothing re-measured): what the report and
# `posbench advise` read. `snakemake results/tables/verdicts.csv` runs it without the PDF.
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
    message:
        "judge {RESULTS}/tables -> verdicts.csv, claims.csv, advice.csv, axes.csv"
    shell:
        "{params.py} -m posbench judge --tables {params.tables} --preset {params.preset:q} > {log} 2>&1"
