"""A4 pages drawn with matplotlib: a cursor flows headings, wrapped text, tables and figures down
the page and starts a new page when the next block does not fit. Text is measured with the Agg
renderer (the same fonts the PDF embeds), so wrapped lines do not run past their column.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties

PAGE_W, PAGE_H = 8.27, 11.69  # A4, inches
MARGIN = 0.6
CONTENT_W = PAGE_W - 2 * MARGIN
LINE_SPACING = 1.3
CELL_PAD = 0.06  # inches around a table cell's text
COLUMN_GAP = 0.08  # extra inches kept free at the right of every column
# One colour meaning on page 1 and in the forest plot: the side of the article's guidance the evidence favours.
FAVOURS_ADDING, FAVOURS_OTHER, FAVOURS_NEITHER = "#9ecae1", "#fdae6b", "#dddddd"
MAX_BODY_LINES = 45  # lines of running text a page may hold (tables and figures aside)


@dataclass(frozen=True)
class Style:
    size: float = 8.5
    weight: str = "normal"
    colour: str = "#000000"
    family: str | None = None  # None: the report's font list; "monospace" for config dumps
    badge: str | None = None  # background colour: the text is drawn as a rounded label


BODY = Style()
SMALL = Style(size=7)
RULE = Style(size=6.5, colour="#444444")
MONO = Style(size=6.5, family="monospace")
H1 = Style(size=15, weight="bold")
H2 = Style(size=11.5, weight="bold")
QUOTE = Style(size=11.5)  # CJK fonts here have no bold face

_CJK = r"[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]"


MEASURE_DPI = 300  # fine enough that glyph hinting does not shrink measured widths


@functools.cache
def _renderer() -> RendererAgg:
    return RendererAgg(int(PAGE_W * MEASURE_DPI), int(PAGE_H * MEASURE_DPI), MEASURE_DPI)


def _font(style: Style) -> FontProperties:
    return FontProperties(size=style.size, weight=style.weight, family=style.family)


@functools.lru_cache(maxsize=20000)
def text_width(text: str, style: Style) -> float:
    """Width in inches of ``text`` drawn in ``style``."""
    width, _, _ = _renderer().get_text_width_height_descent(text, _font(style), ismath=False)
    return width / MEASURE_DPI


def wrap(text: str, width: float, style: Style) -> list[str]:
    """Greedy line breaking at spaces, or between any two CJK characters.

    A line's width is the sum of its pieces' widths (each measured once), which errs on the wide
    side by at most a trailing space.
    """
    lines = []
    for paragraph in str(text).split("\n"):
        pieces = re.findall(rf"{_CJK}|[^\s\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]+\s*|\s+", paragraph) or [""]
        line, used = "", 0.0
        for piece in pieces:
            piece_width = text_width(piece, style)
            if line and used + piece_width > width:
                lines.append(line.rstrip())
                line, used = piece.lstrip(), text_width(piece.lstrip(), style)
            else:
                line, used = line + piece, used + piece_width
            while used > width and len(line) > 1:  # one word wider than the column: broken, never spilled
                head = _longest_fit(line, width, style)
                lines.append(head)
                line = line[len(head):]
                used = text_width(line, style)
        lines.append(line.rstrip())
    return lines


def _longest_fit(text: str, width: float, style: Style) -> str:
    """The longest start of ``text`` that fits ``width`` (at least one character), cut after an underscore
    where one falls in its second half."""
    end = max(1, next((n for n in range(len(text), 0, -1) if text_width(text[:n], style) <= width), 1))
    cut = text.rfind("_", end // 2, end)
    return text[:cut + 1] if cut > 0 else text[:end]


def line_height(style: Style) -> float:
    return style.size * LINE_SPACING / 72


Cell = list[tuple[str, Style]]  # runs stacked top to bottom


class Document:
    """Pages of one PDF; ``y`` is the cursor's distance from the top of the page, in inches."""

    def __init__(self, pdf: PdfPages, footer: str):
        self.pdf, self.footer = pdf, footer
        self.figure: Figure | None = None
        self.y = MARGIN
        self.pages = 0
        self.body_lines: list[int] = []  # per page, lines of running text (paragraph lines but code dumps)

    # ----- pages --------------------------------------------------------------------------------
    def new_page(self) -> None:
        self.close_page()
        self.figure = Figure(figsize=(PAGE_W, PAGE_H))
        self.y = MARGIN
        self.pages += 1
        self.body_lines.append(0)

    def close_page(self) -> None:
        if self.figure is not None:
            self._text(PAGE_W / 2, PAGE_H - MARGIN / 2, f"{self.footer} · page {self.pages}", RULE, ha="center")
            self.pdf.savefig(self.figure)
            self.figure = None

    def room(self) -> float:
        return PAGE_H - MARGIN - self.y

    def need(self, height: float) -> None:
        if self.figure is None or height > self.room():
            self.new_page()

    def _text(self, x: float, y: float, text: str, style: Style, ha: str = "left") -> None:
        badge = dict(boxstyle="round,pad=0.3", fc=style.badge, ec="none") if style.badge else None
        self.figure.text(x / PAGE_W, 1 - y / PAGE_H, text, fontproperties=_font(style), color=style.colour,
                         ha=ha, va="top", bbox=badge, parse_math=False)

    # ----- blocks -------------------------------------------------------------------------------
    def heading(self, text: str, style: Style = H2, page_break: bool = False, keep: float = 0.4) -> None:
        """``keep``: inches of what follows that must fit on the heading's page. A heading wider than the page
        is broken into lines, never run off its edge."""
        if page_break:
            self.new_page()
        lines = wrap(text, CONTENT_W, style)
        self.need(line_height(style) * (len(lines) + 1) + keep)
        self.y += 0.08 if self.y > MARGIN else 0
        for line in lines:
            self._text(MARGIN, self.y, line, style)
            self.y += line_height(style)
        self.y += 0.05

    def paragraph(self, text: str, style: Style = BODY, indent: float = 0.0) -> None:
        for line in wrap(text, CONTENT_W - indent, style):
            self.need(line_height(style))
            self._text(MARGIN + indent, self.y, line, style)
            self.y += line_height(style)
            self.body_lines[-1] += style.family != "monospace"
        self.y += 0.05

    def table(self, rows: list[list[Cell]], widths: list[float], header: list[str] | None = None,
              rules: bool = True) -> None:
        """Rows of cells; ``widths`` are fractions of the content width. A row never splits."""
        columns = [w * CONTENT_W for w in widths]
        header_row = [[(h, Style(size=7.5, weight="bold"))] for h in header] if header else None
        if header_row:
            self._row(header_row, columns, rules)
        for row in rows:
            laid = self._lay_out(row, columns)
            if self._height(laid) > self.room():
                self.new_page()
                if header_row:
                    self._row(header_row, columns, rules)
            self._draw_row(laid, columns, rules)
        self.y += 0.1

    def _lay_out(self, row: list[Cell], columns: list[float]) -> list[list[tuple[str, Style]]]:
        return [[(line, style) for text, style in cell
                 for line in wrap(text, width - 2 * CELL_PAD - COLUMN_GAP - (0.1 if style.badge else 0), style)]
                for cell, width in zip(row, columns)]

    @staticmethod
    def _height(laid) -> float:
        return max(sum(line_height(s) + (0.06 if s.badge else 0) for _, s in cell) for cell in laid) + 2 * CELL_PAD

    def _row(self, row, columns, rules) -> None:
        laid = self._lay_out(row, columns)
        self.need(self._height(laid))
        self._draw_row(laid, columns, rules)

    def _draw_row(self, laid, columns, rules) -> None:
        x = MARGIN
        for cell, width in zip(laid, columns):
            y = self.y + CELL_PAD
            for line, style in cell:
                self._text(x + CELL_PAD + (0.05 if style.badge else 0), y + (0.03 if style.badge else 0), line, style)
                y += line_height(style) + (0.06 if style.badge else 0)
            x += width
        self.y += self._height(laid)
        if rules:
            self.figure.add_artist(_hline(self.y))

    def figure_block(self, draw: Callable[[Figure, tuple[float, float, float, float]], None], height: float,
                     caption: str) -> None:
        """``draw(figure, rect)`` fills ``rect`` (left, bottom, right, top in figure fractions)."""
        caption_lines = wrap(caption, CONTENT_W, SMALL)
        self.need(height + len(caption_lines) * line_height(SMALL) + 0.1)
        rect = (MARGIN / PAGE_W, 1 - (self.y + height) / PAGE_H, 1 - MARGIN / PAGE_W, 1 - self.y / PAGE_H)
        draw(self.figure, rect)
        self.y += height + 0.05
        self.paragraph(caption, SMALL)


def _hline(y: float):
    from matplotlib.lines import Line2D

    top = 1 - y / PAGE_H
    return Line2D([MARGIN / PAGE_W, 1 - MARGIN / PAGE_W], [top, top], lw=0.4, color="#999999")
