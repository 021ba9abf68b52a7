"""The per-call ratios of `peers.py` as a picture: one group of bars per figure, one bar per
implementation, against REST on the same server (1.0x, a dashed line).

matplotlib is an optional benchmark dependency (`pip install -e '.[bench]'`, which
`make bench-peers` does); it draws off screen (the Agg backend), so no display is needed.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

# One colour per implementation, this library first; readable in print and for most colour
# vision (Okabe-Ito palette).
COLOURS: Final = ("#0072B2", "#E69F00", "#009E73", "#CC79A7")
BAR_HEIGHT: Final = 0.8


def write_ratio_chart(
    path: Path, title: str, impls: Sequence[str], ratios: Mapping[str, Mapping[str, float]], caption: str
) -> None:
    """Draw `ratios` (figure -> implementation -> ratio to REST) as grouped horizontal bars,
    each bar labelled with its value, and save a PNG at `path`."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as missing:
        raise SystemExit(
            f"the chart needs matplotlib ({missing}): pip install -e '.[bench]', or run `make bench-peers`"
        ) from None
    figures = list(ratios)
    width = BAR_HEIGHT / len(impls)
    figure, axes = pyplot.subplots(figsize=(9, 1.1 + 0.9 * len(figures)), dpi=120)
    for index, impl in enumerate(impls):
        offsets = [row - (len(impls) - 1 - 2 * index) * width / 2 for row in range(len(figures))]  # first on top
        values = [ratios[name][impl] for name in figures]
        bars = axes.barh(offsets, values, height=width, color=COLOURS[index % len(COLOURS)], label=impl)
        axes.bar_label(bars, labels=[f"{value:.2f}x" for value in values], padding=3, fontsize=8)
    axes.axvline(1.0, color="black", linestyle="--", linewidth=1)
    axes.set_yticks(range(len(figures)), labels=figures)
    axes.invert_yaxis()  # the first figure on top, as in the table
    axes.set_xlabel("tool call / REST on the same server (lower is better; 1.0x = REST)")
    axes.set_xlim(0, max(value for row in ratios.values() for value in row.values()) * 1.15)
    axes.set_title(title, pad=28)
    axes.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(impls), frameon=False)
    axes.spines[["top", "right"]].set_visible(False)
    figure.text(0.01, 0.01, "\n".join(textwrap.wrap(caption, 150)), fontsize=7, color="#555555")
    figure.tight_layout(rect=(0, 0.05, 1, 1))
    figure.savefig(path)
    pyplot.close(figure)
