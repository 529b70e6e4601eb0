from pathlib import Path

# Every record under results/records/ (all machines) -> tables; failed cells stay as rows.


rule aggregate:
    input:
        PROFILE_RECORDS,
        TRAIN_RECORDS,
        PROBE_RECORDS,
    output:
        TABLES,
        expand(
            f"{RESULTS}/tables/{{table}}.parquet",
            table=["cost", "accuracy", "extrapolation", "probe"],
        ),
    log:
        f"{RESULTS}/logs/aggregate.log",
    conda:
        "../../envs/posbench.yaml"
    params:
        py=PY,
        records=lambda wildcards, output: Path(output[0]).parent.parent / "records",
        tables=lambda wildcards, output: Path(output[0]).parent,
    message:
        "aggregate {RESULTS}/records into {RESULTS}/tables"
    shell:
        "{params.py} -m posbench aggregate --records {params.records} --out {params.tables} > {log} 2>&1"
