"""Where the workflow's records, manifests and preflights lie: the path templates, the wildcard patterns
that read their folders back, and the list-in-a-name spelling they share.

A template names every field that tells one record from another of the same machine (the module
docstring of :mod:`posbench.workflow` says which); :mod:`posbench.workflow` fills them per cell and the
rules (``workflow/rules/*.smk``) match them with the patterns below.
"""

from __future__ import annotations

from posbench.devices import FLOAT32, TORCH_DTYPES

# A record per cell; a job per batch of cells (posbench.batch), whose only declared output is its manifest.
# A manifest's name lists the batch's values (seeds0-1-2, d16-32, a profile job's encodings as a count and
# digest, E8-3f2a09c1): a sweep that gains a seed, width or encoding names a new manifest, so its job
# runs whatever Snakemake's rerun triggers are.
PROFILE_RECORD = "{results}/records/{machine}/profile/{device}/{mode}/{size}/{encoding}/L{seq_len}.json"
TRAIN_RECORD = ("{results}/records/{machine}/train/{device}/{dtype_dir}{task}/{size}/{encoding}/{axes_dir}"
                "steps{steps}/{lr_dir}seed{seed}.json")
PROBE_RECORD = ("{results}/records/{machine}/probe/{device}/{dtype_dir}{embedding}/{encoding}/{tokens}/L{seq_len}/"
                "d{d_model}/seed{seed}.json")
PREFLIGHT = "{results}/preflight/{machine}/{device}.json"  # a device the profile jobs on it need checked first
PROFILE_BATCH = "{results}/batches/{machine}/profile/{device}/{mode}/{size}/L{seq_len}/{encodings}.json"
TRAIN_BATCH = ("{results}/batches/{machine}/train/{device}/{dtype_dir}{task}/{size}/{encoding}/{axes_dir}"
               "steps{steps}/{lr_dir}seeds{seeds}.json")
PROBE_BATCH = ("{results}/batches/{machine}/probe/{device}/{dtype_dir}{embedding}/{encoding}/{tokens}/L{seq_len}/"
               "d{d_models}.seeds{seeds}.json")
LIST_SEPARATOR = "-"  # between the values of a list in a manifest's name
ENCODINGS_KEY = r"E[0-9]+-[0-9a-f]{8}"  # a profile job's encodings (encodings_key) as a wildcard matches them
NUMBER_LIST = rf"[0-9]+({LIST_SEPARATOR}[0-9]+)*"  # such a list as a wildcard matches it
LR_DIR = r"(lr[0-9.e+-]+/)?"  # a rate's folder (lr_dir), or nothing at the task's default
AXES_DIR = r"(?:L([0-9]+)/)?(?:d([0-9]+)/)?"  # a length's and a width's folders (axes_dir), or nothing
DTYPE_DIR = "((?:{})/)?".format("|".join(d for d in TORCH_DTYPES if d != FLOAT32))  # dtype_dir's folder, or nothing


def joined(values: list[int] | list[str]) -> str:
    """Lengths or sizes as a manifest's name holds them; :func:`split` reads them back for the command line."""
    return LIST_SEPARATOR.join(map(str, values))


def split(text: str) -> str:
    """``256-1024`` -> ``256 1024``: a manifest name's list as command-line arguments."""
    return " ".join(text.split(LIST_SEPARATOR))


def record_template(template: str, **known) -> str:
    """``template`` with ``known`` fields filled and the others left as ``{field}``: a batch's ``--out``."""
    return template.format_map(_KeepUnknown(known))


class _KeepUnknown(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"
