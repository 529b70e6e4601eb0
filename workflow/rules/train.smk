# One job per (task, encoding, size, seed): 20–40 s each on one core; they may run side by side.


rule train:
    output:
        pw.TRAIN_RECORD.replace("{results}", RESULTS),
    log:
        f"{RESULTS}/logs/{{machine}}/train/{{task}}/{{size}}/{{encoding}}/seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/{{machine}}/train/{{task}}/{{size}}/{{encoding}}/seed{{seed}}.tsv"
    conda:
        "../../envs/posbench.yaml"
    threads: config["train"]["threads"]
    resources:
        timing=1,
    params:
        py=PY,
        steps=lambda wc: (
            f"--steps {config['train']['steps']}" if config["train"]["steps"] else ""
        ),
        data=lambda wc: (
            f"--data {config['train']['data'][wc.task]}"
            if wc.task in config["train"]["data"]
            else ""
        ),
    message:
        "train {wildcards.task} {wildcards.encoding} {wildcards.size} seed {wildcards.seed}"
    shell:
        "POSBENCH_MACHINE={wildcards.machine} {params.py} -m posbench train --task {wildcards.task}"
        " --encoding {wildcards.encoding} --size {wildcards.size} --seed {wildcards.seed}"
        " --threads {threads} {params.steps} {params.data} --out {output} > {log} 2>&1"
        " || test -s {output}"
