"""The page on the projected cost at deployed architectures: the judge step's ``projection.csv``
(:mod:`posbench.projection`, nothing measured), every figure on it labelled projected. One table per question a
deployer asks: what each encoding costs at one architecture and GPU as the context grows, and how the named
architectures fare on each GPU at 128k.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from posbench.report.layout import BODY, H2, SMALL, Document, Style
from posbench.tables import Tables

TITLE = "What would each encoding cost at deployed architectures? (projected, not measured)"
TABLE = "projection.csv"  # as posbench.projection.TABLE writes it
FOCUS = ("llama-3-8b", "h100")  # the architecture and GPU of the first table: the question
CONTEXTS = (4096, 32768, 131072)  # the first table's columns
LONGEST = 131072
VECTOR = "rope"  # the second table's encoding: the one most deployed models use
GIB = 2**30
HEADER = ["Encoding", *(f"decode ms/tok {n // 1024}k" for n in CONTEXTS), "prefill µs/tok 128k",
          "position GiB 128k", "memory GiB 128k"]


def page(doc: Document, tables: Tables) -> None:
    path = Path(tables.folder) / TABLE
    doc.heading(TITLE, H2, page_break=path.is_file())
    if not path.is_file():
        doc.paragraph(f"Not shown: {TABLE} is not in {tables.folder}: run `python -m posbench judge` first.", BODY)
        return
    found = pd.read_csv(path)
    doc.paragraph("PROJECTED, not measured: posbench.projection's cost model (the judge step wrote projection.csv). "
                  "Architectures from the models' config.json on the Hugging Face hub; a roofline per operation from "
                  "each GPU's datasheet dense bf16 peak and memory bandwidth, batch 1, no per-operation overhead. A "
                  "trained logit bias (T5, FIRE, KERPLE) is materialised as an (h, L, L) tensor. Check it on this "
                  "machine: `python -m posbench project --check TABLES` (results/reference/projection).",
                  SMALL)
    arch, device = FOCUS
    focus = found[(found["shape"] == arch) & (found["device"] == device)]
    doc.paragraph(f"{arch} on {device}, by context (memory: weights + KV cache + position tensors; "
                  "'does not fit' beyond the GPU's memory):", Style(size=8.5, weight="bold"))
    doc.table(focus_rows(focus), [0.22, 0.11, 0.11, 0.11, 0.15, 0.14, 0.16], header=HEADER)
    longest = found[(found["encoding"] == VECTOR) & (found["context"] == LONGEST)]
    devices = list(dict.fromkeys(longest["device"]))
    doc.paragraph(f"Every named architecture at {LONGEST // 1024}k tokens with {VECTOR}: decode ms per token, and "
                  "whether weights and KV cache fit:", Style(size=8.5, weight="bold"))
    doc.table(architecture_rows(longest, devices), [0.2, *([0.8 / len(devices)] * len(devices))],
              header=["Architecture", *devices])


def focus_rows(focus: pd.DataFrame) -> list[list]:
    rows = []
    for encoding, rows_of in focus.groupby("encoding", sort=True):
        at = rows_of.set_index("context")
        if not set(CONTEXTS) <= set(at.index):
            continue
        longest = at.loc[LONGEST]
        fits = "" if longest["fits"] else " (does not fit)"
        cells = [encoding, *(f"{at.loc[n, 'decode_ms_per_token']:.3g}" for n in CONTEXTS),
                 f"{longest['prefill_us_per_token']:.3g}", f"{longest['position_bytes'] / GIB:.3g}",
                 f"{longest['total_bytes'] / GIB:.3g}{fits}"]
        rows.append([[(cell, SMALL)] for cell in cells])
    return rows


def architecture_rows(longest: pd.DataFrame, devices: list[str]) -> list[list]:
    rows = []
    for arch, rows_of in longest.groupby("shape", sort=False):  # the column names the architecture
        at = rows_of.set_index("device")
        cells = [f"{at.loc[d, 'decode_ms_per_token']:.3g} ms" + ("" if at.loc[d, "fits"] else ", does not fit")
                 if d in at.index else "—" for d in devices]
        rows.append([[(arch, SMALL)], *([(cell, SMALL)] for cell in cells)])
    return rows
