"""A few style touches on top of .streamlit/config.toml (tighter top padding, calmer metrics)."""
from __future__ import annotations

import streamlit as st

CSS = """
<style>
.block-container {padding-top: 2.2rem; padding-bottom: 2rem; max-width: 1600px;}
[data-testid="stMetricValue"] {font-size: 1.55rem;}
/* headline numbers never truncate: a value wraps rather than ending in "…", and a row of metrics wraps onto a
   second line when its columns get narrower than a number (800-px windows, zoomed browsers) */
[data-testid="stMetricValue"] > div, [data-testid="stMetricLabel"] p {white-space: normal; overflow: visible;
  text-overflow: clip; overflow-wrap: anywhere;}
[data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] [data-testid="stMetric"]) {flex-wrap: wrap;
  row-gap: 0.4rem;}
[data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] [data-testid="stMetric"]) > [data-testid="stColumn"]
  {min-width: 6.6rem;}
@media (max-width: 1100px) {[data-testid="stMetricValue"] {font-size: 1.25rem;}}
[data-testid="stMetricLabel"] p {font-size: 0.82rem; color: #5f6b7a;}
[data-testid="stSidebar"] [data-testid="stCaptionContainer"] {margin-top: -0.45rem;}
[data-testid="stSidebar"] h3 {margin-top: 0.3rem; margin-bottom: -0.3rem; font-size: 1.0rem; color: #2f3b4c;}
div[data-testid="stExpander"] details summary p {font-weight: 600;}
</style>
"""


def apply_theme() -> None:
    st.markdown(CSS, unsafe_allow_html=True)


def page_header(title: str, lead: str) -> None:
    st.markdown(f"## {title}")
    st.markdown(f"<div style='color:#55606e;margin-top:-0.6rem;margin-bottom:0.6rem'>{lead}</div>",
                unsafe_allow_html=True)
