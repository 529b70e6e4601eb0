# One job per (device, mode, size, length) over every configured encoding. Each cell's memory, attention
# path and FLOPs are measured in its own fresh process; then one process times the latencies of all the
# cells that passed, in alternation round by round (the order rotating), so a change of load hits every
# encoding alike and their ratios are paired. (oom, skipped and error cells write records too; a skipped
# or error cell fails the job, which then writes no manifest, so a rerun measures it again and times it
# with the other cells it has to redo.) A profile job claims the whole `timing` budget, so no other job
# of this workflow (timing or training) runs beside it and pollutes its latency; training jobs claim one
# unit. Every device is checked once first (preflight): one the config names but this machine lacks
# stops the run there, in one line. With `gpu_model` set, a CUDA job asks SLURM for that GPU model
# (the `constraint` resource, sbatch -C): every record of a sweep then comes from one model.


rule preflight:
    output:
        paths.PREFLIGHT.replace("{results}", RESULTS),
    log:
        f"{RESULTS}/logs/{{machine}}/preflight/{{device}}.log",
    conda:
        "../../envs/posbench.yaml"
    resources:
        gpu=gpus,
    params:
        py=PY,
    message:
        "preflight: can this job use {wildcards.device}?"
    shell:
        "{params.py} -m posbench preflight --device {wildcards.device} --out {output} > {log} 2>&1"
        " || {{ tail -n 1 {log} >&2; exit 1; }}"


rule profile:
    input:
        paths.PREFLIGHT.replace("{results}", RESULTS),
    output:
        paths.PROFILE_BATCH.replace("{results}", RESULTS),
    log:
        f"{RESULTS}/logs/{{machine}}/profile/{{device}}/{{mode}}/{{size}}/L{{seq_len}}/{{encodings}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/{{machine}}/profile/{{device}}/{{mode}}/{{size}}/L{{seq_len}}/{{encodings}}.tsv"
    conda:
        "../../envs/posbench.yaml"
    threads: config["profile"]["threads"]
    resources:
        timing=100,
        gpu=gpus,
        constraint=gpu_model,
        # on SLURM: a CPU timing job has its node to itself; a GPU job asks for its one GPU only, and
        # room for a CUDA parent and child process
        slurm_extra=lambda wc: "" if on_cuda(wc.device) else "--exclusive",
        mem_mb=lambda wc: 16000 if on_cuda(wc.device) else 6000,
    params:
        py=PY,
        p=config["profile"],
        encodings=lambda wc: " ".join(pw.profile_job_encodings(config, wc.encodings)),
        # one table size for the whole sweep: a learned encoding's parameters don't vary by cell
        max_len=pw.profile_max_len(config),
        records=record_out(paths.PROFILE_RECORD),
    message:
        "profile {params.encodings} {wildcards.size} L={wildcards.seq_len} on {wildcards.device} ({wildcards.mode})"
    shell:
        "POSBENCH_MACHINE={wildcards.machine} {params.py} -m posbench profile"
        " --encoding {params.encodings} --size {wildcards.size} --seq-len {wildcards.seq_len}"
        " --device {wildcards.device} --mode {wildcards.mode} --batch {params.p[batch]}"
        " --dtype {params.p[dtype]} --threads {threads} --min-repeats {params.p[min_repeats]}"
        " --min-seconds {params.p[min_seconds]} --max-len {params.max_len}"
        " --out {params.records:q} --manifest {output} > {log} 2>&1"
