# Every record under results/records/ (all machines) -> tables; failed cells stay as rows.


rule aggregate:
    input:
        PROFILE_RECORDS,
        TRAIN_RECORDS,
    output:
        TABLES,
        expand(f"{RESULTS}/tables/{{table}}.parquet", table=["cost", "accuracy", "extrapolation"]),
    conda:
        "../../envs/posbench.yaml"
    log:
        f"{RESULTS}/logs/aggregate.log",
    message:
        "aggregate {RESULTS}/records into {RESULTS}/tables"
    shell:
        "{PY} -m posbench aggregate --records {RESULTS}/records --out {RESULTS}/tables > {log} 2>&1"
