# Validate the config (one line per problem, before any job runs) and derive the sweep's cells.
import sys

from posbench import workflow as pw

try:
    config = pw.validate_config(
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
BATCHES = pw.batch_manifests(config, DEVICES)
TABLES = expand(
    f"{RESULTS}/tables/{{table}}.csv",
    table=["cost", "accuracy", "extrapolation", "probe"],
)


wildcard_constraints:
    machine=r"[A-Za-z0-9_.-]+",
    device=r"cpu|mps|cuda(:[0-9]+)?",
    mode=r"infer|train",
    size=r"[a-z]+",
    encoding=r"[a-z0-9_]+",
    seq_len=r"[0-9]+",
    task=r"[a-z0-9_]+",
    seq_lens=r"[0-9]+(-[0-9]+)*",
    seeds=r"[0-9]+(-[0-9]+)*",
    d_models=r"[0-9]+(-[0-9]+)*",
