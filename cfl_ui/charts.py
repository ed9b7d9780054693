"""The one way a chart reaches a page: figures cached per run and round, drawn with the toolbar config, a title
above and a caption below.

    chart(lambda: F.metric_figure(series, ["ari"]), "cmp.ari", cache=("ari", unit_key(u)),
          title="**Clusters found (ARI) over rounds**", caption="How well ...")

A refresh of a live page (about once a second) reuses the figures whose data did
not change instead of rebuilding them: `cache` names what a figure is built from
(`unit_key` for a run's records so far).
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import streamlit as st

# every chart's toolbar: the camera button (PNG) and zoom stay, the plotly logo goes
TOOLBAR = {"displaylogo": False}
CACHE_SIZE = 256

_LOCK = threading.Lock()
_CACHE: "OrderedDict[tuple, object]" = OrderedDict()


def cached(key: tuple, build):
    """`build()` once per key (the most recent CACHE_SIZE kept), shared by every session of the server."""
    with _LOCK:
        value = _CACHE.get(key)
        if value is not None:
            _CACHE.move_to_end(key)
            return value
    value = build()
    with _LOCK:
        _CACHE[key] = value
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return value


def unit_key(unit) -> tuple:
    """What a run's figures are built from: the run and how many rounds it has so far."""
    recs = unit.records
    return (unit.ref, unit.folder, len(recs), recs[-1].round if recs else -1)


def chart(figure, key: str, *, cache: tuple | None = None, title: str | None = None,
          caption: str | None = None):
    """Draw one plotly chart and return its figure.

    figure: a figure, or a function that builds it (built once per `cache` key when one is given).
    title: markdown above the chart; caption: the one-line explanation below it."""
    if title:
        st.markdown(title)
    if cache is not None:
        figure = cached(cache, figure)
    elif callable(figure):
        figure = figure()
    st.plotly_chart(figure, key=key, width="stretch", config=TOOLBAR)
    if caption:
        st.caption(caption)
    return figure
