"""A figure enlarged for a projector (presenter mode): every length plotly draws in pixels times one factor.

Presenter mode used to zoom the whole page with CSS, and plotly, which lays a chart out in the pixels it is given,
then drew legends, colour bars and the replay's buttons past its own box (issue 34). Here the figure itself is
sized: its height and margins, every font, marker and line, and every pixel offset (pads, shifts, legend gaps, a
colour bar's thickness). Positions given in paper fractions are left alone: derived from pixels (a note kept
6 px above a legend, the replay's buttons 62 px under the plot), they stay the same fraction of a plot that has
grown by the same factor in both its size and its margins, so they keep their place.

Pure: a new dict, the figure it came from untouched (a figure shared by every session may be scaled for one).
"""
from __future__ import annotations

# keys whose number (or list of numbers) is a length in pixels wherever they appear
_PIXELS = {"borderpad", "xshift", "yshift", "tracegroupgap", "itemwidth", "thickness", "ticklen", "standoff",
           "arrowwidth", "arrowsize", "borderwidth", "outlinewidth", "tickwidth", "linewidth", "gridwidth",
           "zerolinewidth"}
# a "size" is a length except in these (bins and the like are data units)
_NOT_PIXEL_SIZE = {"xbins", "ybins", "nbinsx", "cumulative", "contours"}
# dicts whose every number is a length in pixels
_ALL_PIXELS = {"margin", "pad"}
PLOTLY_FONT = 12  # plotly's default font size, for a figure that sets none
COLORBAR_PX = 30  # plotly's default colour-bar thickness


def _times(value, factor: float):
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return round(value * factor, 2)
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                for v in value):
        return [round(v * factor, 2) for v in value]
    return value


def _walk(node, factor: float, parent: str = ""):
    """A copy of a figure's dict (or of a part of it) with its pixel lengths scaled."""
    if isinstance(node, list):  # data arrays (no dict or list in them) are kept as they are: nothing to scale
        return [_walk(v, factor, parent) for v in node] if any(isinstance(v, (dict, list)) for v in node) else node
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if isinstance(value, (dict, list)) and not (key in ("size", "width") and isinstance(value, list)):
            if parent in _ALL_PIXELS:
                out[key] = value
            elif key in _ALL_PIXELS and isinstance(value, dict):
                out[key] = {k: _times(v, factor) for k, v in value.items()}
            else:
                out[key] = _walk(value, factor, key)
        elif (key in _PIXELS or (key == "size" and parent not in _NOT_PIXEL_SIZE)
              or (key == "width" and parent == "line")):
            out[key] = _times(value, factor)
        else:
            out[key] = value
    return out


def scaled_spec(spec: dict, factor: float) -> dict:
    """`spec` (a figure's dict: data, layout, frames) with every pixel length times `factor`; the same dict when
    the factor is 1. The template is left as it is (its sizes are plotly's defaults, set here explicitly)."""
    if factor == 1:
        return spec
    layout = dict(spec.get("layout") or {})
    template = layout.pop("template", None)
    lay = _walk(layout, factor)
    legend = lay.get("legend")
    if isinstance(legend, dict) and legend.get("entrywidthmode", "pixels") == "pixels" and "entrywidth" in legend:
        lay["legend"] = {**legend, "entrywidth": _times(legend["entrywidth"], factor)}
    for key in ("height", "width"):
        if isinstance(lay.get(key), (int, float)):
            lay[key] = int(round(lay[key] * factor))
    font = dict(lay.get("font") or {})
    font.setdefault("size", PLOTLY_FONT * factor)  # the size every text without its own inherits
    lay["font"] = font
    if template is not None:
        lay["template"] = template
    data = [_walk(t, factor) for t in spec.get("data") or []]
    for trace in data:  # a colour bar's default thickness is in pixels too
        if trace.get("type") in ("heatmap", "contour", "histogram2d") and trace.get("showscale", True):
            bar = trace.setdefault("colorbar", {})
            bar.setdefault("thickness", COLORBAR_PX * factor)
    out = {**spec, "data": data, "layout": lay}
    if spec.get("frames"):
        out["frames"] = [_walk(f, factor) for f in spec["frames"]]
    return out
