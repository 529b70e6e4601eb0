# Validate the config (one line per problem, before any job runs) and derive the sweep's cells.
import sys

from posbench import workflow as pw
from posbench import workflow_config
from posbench import workflow_paths as paths
from posbench.analytic import TABLE as ANALYTIC_TABLE
from posbench.tables import TABLE_NAMES
from posbench.devices import ANY_DEVICE, on_cuda

try:
    config = workflow_config.validate_config(
        config, workflow.source_path("../schemas/config.schema.yaml")
    )
except pw.ConfigError as error:
    sys.exit(f"posbench: {error}")

RESULTS = config["results"]
MACHINE = pw.machine_label(config)
PY = config["python"]
DEVICES, DROPPED = pw.resolve_devices(config["devices"])
if DROPPED:
    print(
        f"posbench: devices kept {', '.join(DEVICES)}; dropped {'; '.join(DROPPED)}",
        file=sys.stderr,
    )
# the GPU model a CUDA profile or train job asks SLURM for (`constraint`, sbatch -C); None: any
GPU_MODEL = config["gpu_model"]
TABLES = expand(
    f"{RESULTS}/tables/{{table}}.csv",
    table=[*TABLE_NAMES, ANALYTIC_TABLE],
)


def record_out(template):
    """A batch job's --out: ``template`` with the job's wildcards filled, the batched fields left."""
    return lambda wc: paths.record_template(
        template, results=RESULTS, **dict(wc.items())
    )


def first_batches(wildcards):
    """The first look's manifests, once the rates this run tunes are chosen (checkpoint lr_table, tune.smk):
    a job's rate names its records' folder."""
    for size in pw.tuned_in_run(config):
        checkpoints.lr_table.get(size=size)
    try:
        return pw.batch_manifests(config, DEVICES)
    except pw.ConfigError as error:
        sys.exit(f"posbench: {error}")


def every_batch(wildcards):
    """The first look's manifests and, once the checkpoint first_look (aggregate.smk) has judged them, those
    of the second looks it asks for, each at its size (pw.second_looks_wanted)."""
    if config["train"]["comparisons"] == "none":
        return first_batches(wildcards)
    wanted = pw.second_looks_wanted(checkpoints.first_look.get().output[0])
    return pw.batch_manifests(config, DEVICES, wanted)


def gpus(wildcards):
    """A job's `gpu` resource: one on a CUDA device (a cluster's --gpus=1), none elsewhere."""
    return int(on_cuda(wildcards.device))


def gpu_model(wildcards):
    """A job's `constraint` resource: GPU_MODEL on a CUDA device, else none."""
    return GPU_MODEL if on_cuda(wildcards.device) else None


wildcard_constraints:
    machine=r"[A-Za-z0-9_.-]+",
    device=ANY_DEVICE.regex,
    dtype_dir=paths.DTYPE_DIR,
    steps=paths.NUMBER_LIST,
    mode=r"infer|train|decode",
    size=r"[a-z][a-z0-9]*",
    encoding=r"[a-z0-9_]+",
    seq_len=r"[0-9]+",
    task=r"[a-z0-9_]+",
    encodings=paths.ENCODINGS_KEY,
    seeds=paths.NUMBER_LIST,
    d_models=paths.NUMBER_LIST,
    lr_dir=paths.LR_DIR,
    axes_dir=paths.AXES_DIR,
