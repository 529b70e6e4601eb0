"""The report's decode figure: per-token latency against context, one line per encoding, drawn from
the cost rows of ``profile --mode decode`` only; without them, its sentence."""

import pandas as pd

from posbench.report import figures
from posbench.tables import load

ENCODINGS = ("none", "rope", "alibi")


def cost_rows(mode: str) -> list[dict]:
    return [{"status": "ok", "encoding": encoding, "size": "base", "device": "cpu", "device_name": "AMD EPYC",
             "mode": mode, "seq_len": context, "batch": 1, "latency_median_ms": 2.0 + context / 1024 + i}
            for i, encoding in enumerate(ENCODINGS) for context in (256, 1024, 4096)]


def tables(folder, rows):
    folder.mkdir(exist_ok=True)
    pd.DataFrame(rows).to_csv(folder / "cost.csv", index=False)
    return load(folder)


def test_decode_rows_draw_one_line_per_encoding(tmp_path):
    loaded = tables(tmp_path, cost_rows("decode") + cost_rows("infer"))
    spec = next(s for s in figures.FIGURES if s.name == "decode_latency")
    assert spec.missing(loaded) is None
    figure = figures.Figure(figsize=(8, spec.height))
    spec.draw(figure, (0.0, 0.0, 1.0, 1.0), loaded)
    (ax,) = figure.axes
    lines = [line for line in ax.lines if len(line.get_xdata())]
    assert len(lines) == len(ENCODINGS)
    assert sorted(tuple(line.get_ydata()) for line in lines) == [
        (2.0 + i + 0.25, 2.0 + i + 1, 2.0 + i + 4) for i in range(len(ENCODINGS))]  # decode rows only
    assert ax.get_title() == "cpu (AMD EPYC), decode, size base"


def test_without_decode_rows_the_figure_is_a_sentence(tmp_path):
    spec = next(s for s in figures.FIGURES if s.name == "decode_latency")
    assert spec.missing(tables(tmp_path, cost_rows("infer"))) == (
        "cost.csv has no ok rows with mode decode (python -m posbench profile --mode decode)")
