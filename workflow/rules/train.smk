# One job per (task, encoding, size, learning rate), training every seed in turn (6–20 s each on one
# core), so Python's and torch's start-up is paid once per job; jobs may run side by side. The path
# names the device and a dtype other than float32 (cpu/, cuda/bfloat16/), passed as --device and
# --dtype, and the steps (steps800/, passed as --steps; steps200-400-800/ for annealed checkpoints at those
# budgets, passed as --checkpoints with the declared --decay-fraction). A rate other than the task's default names a
# folder (lr_dir, e.g. lr0.001/) and is passed as --lr; a training length or width other than the
# task's and size's (a sweep's) names folders too (axes_dir, L256/d48/). On `train.device` cuda a
# job claims one `gpu` (a cluster's --gpus=1); a job that lands where no GPU is visible writes
# `skipped` records with the reason. Jobs start longest first (pw.longest_first), so none trains alone at the end.


rule train:
    output:
        paths.TRAIN_BATCH.replace("{results}", RESULTS),
    log:
        f"{RESULTS}/logs/{{machine}}/train/{{device}}/{{dtype_dir}}{{task}}/{{size}}/{{encoding}}/{{axes_dir}}steps{{steps}}/{{lr_dir}}seeds{{seeds}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/{{machine}}/train/{{device}}/{{dtype_dir}}{{task}}/{{size}}/{{encoding}}/{{axes_dir}}steps{{steps}}/{{lr_dir}}seeds{{seeds}}.tsv"
    priority: lambda wc: pw.train_priority(wc.task, wc.size, wc.axes_dir, wc.steps, wc.seeds)
    conda:
        "../../envs/posbench.yaml"
    threads: config["train"]["threads"]
    resources:
        timing=1,
        gpu=gpus,
        constraint=gpu_model,
    params:
        py=PY,
        dtype=lambda wc: pw.dtype_of(wc.dtype_dir),
        seeds=lambda wc: paths.split(wc.seeds),
        lr=lambda wc: pw.lr_argument(wc.lr_dir),
        budget=lambda wc: pw.budget_arguments(wc.steps),
        axes=lambda wc: pw.axes_arguments(wc.axes_dir),
        data=lambda wc: (
            f"--data {config['train']['data'][wc.task]}"
            if wc.task in config["train"]["data"]
            else ""
        ),
        eval_scaling=lambda wc: pw.eval_scaling_argument(config, wc.encoding),
        records=record_out(paths.TRAIN_RECORD),
    message:
        "train {wildcards.task} {wildcards.encoding} {wildcards.size} {params.axes} {params.lr} {wildcards.steps} steps"
        " on {wildcards.device} {params.dtype}, seeds {params.seeds}"
    shell:
        "POSBENCH_MACHINE={wildcards.machine} {params.py} -m posbench train --task {wildcards.task}"
        " --encoding {wildcards.encoding} --size {wildcards.size} --seed {params.seeds}"
        " --device {wildcards.device} --dtype {params.dtype} --threads {threads} {params.budget}"
        " {params.lr}"
        " {params.axes}"
        " {params.data} {params.eval_scaling}"
        " --out {params.records:q} --manifest {output} > {log} 2>&1"
