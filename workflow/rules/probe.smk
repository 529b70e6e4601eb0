# One job per (embedding, encoding, vocabulary, length), probing every width × seed in turn: a few
# seconds a cell with random embeddings, up to ~40 s with a trained lm_prose model, on one core.
# Jobs may run side by side (they claim one unit of `timing`, as training does). The lm_prose run of
# trained embeddings trains on `train.device` in `train.dtype`, claiming a `gpu` there as training does;
# the path names them as a train record's does (cuda/bfloat16/trained/…; random embeddings: cpu/).


rule probe:
    output:
        paths.PROBE_BATCH.replace("{results}", RESULTS),
    log:
        f"{RESULTS}/logs/{{machine}}/probe/{{device}}/{{dtype_dir}}{{embedding}}/{{encoding}}/{{tokens}}/L{{seq_len}}/d{{d_models}}.seeds{{seeds}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/{{machine}}/probe/{{device}}/{{dtype_dir}}{{embedding}}/{{encoding}}/{{tokens}}/L{{seq_len}}/d{{d_models}}.seeds{{seeds}}.tsv"
    wildcard_constraints:
        embedding=r"random|trained",
        tokens=r"V[0-9]+|lm_prose",
    conda:
        "../../envs/posbench.yaml"
    threads: config["probe"]["threads"]
    resources:
        timing=1,
        gpu=gpus,
    params:
        py=PY,
        dtype=lambda wc: pw.dtype_of(wc.dtype_dir),
        vocab=lambda wc: f"--vocab {wc.tokens[1:]}" if wc.tokens.startswith("V") else "",
        widths=lambda wc: paths.split(wc.d_models),
        seeds=lambda wc: paths.split(wc.seeds),
        steps=config["probe"]["train_steps"],
        records=record_out(paths.PROBE_RECORD),
    message:
        "probe {wildcards.encoding} {wildcards.embedding} {wildcards.tokens} L={wildcards.seq_len}: d={params.widths}, seeds {params.seeds}"
    shell:
        "POSBENCH_MACHINE={wildcards.machine} {params.py} -m posbench probe --encoding {wildcards.encoding}"
        " --d-model {params.widths} --embedding {wildcards.embedding} {params.vocab}"
        " --seq-len {wildcards.seq_len} --seed {params.seeds} --train-steps {params.steps}"
        " --device {wildcards.device} --dtype {params.dtype}"
        " --threads {threads} --out {params.records:q} --manifest {output} > {log} 2>&1"
