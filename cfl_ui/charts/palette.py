"""One visual language for every chart.

True clusters are always coloured from CLUSTER_COLORS (Tableau 10: bold hues);
models are always told apart by MODEL_SYMBOLS in scatter plots and coloured
from MODEL_COLORS (Plotly's muted "Safe" family, darker, never used for
clusters) where a colour is the only channel (assignment heatmap, stacked
area). Algorithms get a fixed colour each in overlaid curves.
"""
from __future__ import annotations

CLUSTER_COLORS = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#EECA3B", "#B279A2", "#FF9DA6",
                  "#9D755D", "#BAB0AC"]
MODEL_COLORS = ["#332288", "#117733", "#CC6677", "#DDCC77", "#88CCEE", "#AA4499", "#44AA99", "#999933",
                "#882255", "#661100", "#6699CC", "#888888"]
MODEL_SYMBOLS = ["circle", "square", "diamond", "triangle-up", "cross", "x", "star", "hexagon", "triangle-down",
                 "pentagon", "hourglass", "bowtie", "star-triangle-up", "diamond-wide", "triangle-left",
                 "triangle-right"]
SYMBOLS_3D = ["circle", "square", "diamond", "cross", "x", "circle-open", "square-open", "diamond-open"]
ALGORITHM_COLORS = {"clove": "#1F77B4", "ifca": "#D62728", "fedavg": "#7F7F7F", "oracle": "#2CA02C",
                    "local": "#9467BD", "cfl": "#FF7F0E", "flexcfl": "#8C564B", "fedgroup": "#E377C2",
                    "fesem": "#BCBD22"}
_EXTRA_ALGO = ["#17BECF", "#393B79", "#637939", "#8C6D31", "#843C39", "#7B4173"]
UNPLACED = "#E8E8E8"
GRID = "#ECECEC"
FONT = "Inter, -apple-system, Segoe UI, Roboto, sans-serif"


def cluster_color(c: int) -> str:
    return CLUSTER_COLORS[int(c) % len(CLUSTER_COLORS)]


def model_color(m: int) -> str:
    return MODEL_COLORS[int(m) % len(MODEL_COLORS)]


def model_symbol(m: int, dims: int = 2) -> str:
    if dims == 3:
        return SYMBOLS_3D[int(m) % len(SYMBOLS_3D)]
    base = MODEL_SYMBOLS[int(m) % len(MODEL_SYMBOLS)]
    return base if int(m) < len(MODEL_SYMBOLS) else f"{base}-open"


def algorithm_color(name: str, index: int = 0) -> str:
    return ALGORITHM_COLORS.get(name) or _EXTRA_ALGO[(sum(map(ord, name)) + index) % len(_EXTRA_ALGO)]
