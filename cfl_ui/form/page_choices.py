"""Each training page's own choices beside the shared settings: their state keys, what a link sets, the widgets.

- Playground: a second algorithm side by side with the first (`vs`).
- Compare: the algorithms compared, each with its own options.
- IFCA initialisation: the algorithms, init modes and number of seeds of its sweep.

A page hands these to its frame (cfl_ui.form.frame): `*_run_config` reads a linked run's settings back, `*_link`
applies a link's page keys (returning notes on what it ignored), `*_defaults` are the choices before any link.
"""
from __future__ import annotations

import streamlit as st

from cfl_core.algorithms import ALGORITHMS
from cfl_core.config import INIT_MODES

from . import job_specs as J
from . import session as S
from .controls import algorithm_label, changed_options
from .url_codec import split_list
from .url_sync import add_notes, apply_algo_options
from ..jobs.run_refs import parse_ref

NONE = "—"

# -- Playground: a second algorithm on the identical clients ------------------------------------------------------
PG = "pg"
VS_KEY = f"{PG}.vs"


def vs_choice() -> str | None:
    """The algorithm side by side with the first one, None for none."""
    value = st.session_state.get(VS_KEY, NONE)
    return value if value in ALGORITHMS else None


def playground_run_config(ref):
    """The config of the run a link points at (when the link carries no config of its own); a link to a run of two
    algorithms side by side sets the second one too."""
    snap = S.snapshot(ref)
    if snap is None:
        return None
    parsed = parse_ref(ref)
    unit = (snap.unit(parsed[1]) if parsed else None) or snap.units[0]
    if parsed and parsed[1] is None and len(snap.units) == 2:
        st.session_state[VS_KEY] = snap.units[1].algorithm
    elif parsed and parsed[1] is not None:
        st.session_state[VS_KEY] = NONE
    return dict(unit.config)


def playground_link(ctl):
    """What a link sets on the Playground: its second algorithm (vs=...), and the run it shows (run=...)."""
    def on_link(extra: dict) -> list:
        if "vs" in extra:
            st.session_state[VS_KEY] = extra["vs"] if extra["vs"] in ALGORITHMS else NONE
        return ctl.attach(extra)
    return on_link


def vs_picker(panel) -> None:
    """The "Side by side with" selector: every algorithm but the first, or none."""
    algo = st.session_state.get(panel.k("algorithm"))
    choices = [NONE, *[a for a in ALGORITHMS if a != algo]]
    if st.session_state.get(VS_KEY) not in choices:
        st.session_state[VS_KEY] = NONE
    st.selectbox("Side by side with", choices, key=VS_KEY,
                 format_func=lambda a: "— (one algorithm)" if a == NONE else algorithm_label(a),
                 help="A second algorithm on the identical clients from the identical initial models, "
                      "trained round for round beside the first.")
    panel.slots["vs"] = st.empty()


# -- Compare: the algorithms, each with its own options --------------------------------------------------------------
CMP = "cmp"
ALGOS_KEY = f"{CMP}.algos"
COMPARE_DEFAULT = [a for a in ("clove", "ifca", "fedavg", "oracle") if a in ALGORITHMS]


def compared() -> list:
    """The algorithms chosen on Compare, each once, from the registry."""
    return list(dict.fromkeys(a for a in st.session_state.get(ALGOS_KEY, []) if a in ALGORITHMS))


def compare_options(algorithms: list) -> dict:
    """Each algorithm's options from its own expander (only values that differ from the defaults)."""
    return {algo: changed_options(CMP, algo) for algo in algorithms}


def compare_run_config(ref):
    snap = S.snapshot(ref)
    return dict(snap.units[0].config) if snap else None


def compare_link(ctl):
    """What a link sets on Compare: algos=..., algo_options=..., and the run (whose algorithms are taken when the
    link names none)."""
    def on_link(extra: dict) -> list:
        if extra.get("algos"):
            given = split_list(extra["algos"])
            st.session_state[ALGOS_KEY] = list(dict.fromkeys(a for a in given if a in ALGORITHMS))  # each once
            ignored = [a for a in given if a not in ALGORITHMS] + (["repeated names"] if len(set(given)) < len(given)
                                                                   else [])
            if ignored:
                add_notes(CMP, [f"algos={extra['algos']!r} in the link: {', '.join(map(repr, ignored))} ignored "
                                "(each algorithm once, from the registry)"])
        if extra.get("algo_options"):
            apply_algo_options(CMP, extra["algo_options"])
        if extra.get("run") and not extra.get("algos"):
            linked = S.snapshot(extra["run"])
            if linked is not None:
                st.session_state[ALGOS_KEY] = [u.algorithm for u in linked.units if u.algorithm in ALGORITHMS]
        return ctl.attach(extra)
    return on_link


def algorithms_picker(panel) -> None:
    st.multiselect("Algorithms", list(ALGORITHMS), key=ALGOS_KEY, format_func=algorithm_label,
                   help="Each runs on the identical clients from the identical initial models.")
    panel.slots["algorithm"] = st.empty()


# -- IFCA initialisation: algorithms x init modes x seeds ----------------------------------------------------------
IFC = "ifc"
IFC_ALGOS_KEY, MODES_KEY, SEEDS_KEY, RUN_KEY = f"{IFC}.algos", f"{IFC}.modes", f"{IFC}.seeds", f"{IFC}.run"
IFCA_DEFAULTS = {IFC_ALGOS_KEY: [a for a in ("ifca", "clove") if a in J.INIT_ALGOS], MODES_KEY: list(INIT_MODES),
                 SEEDS_KEY: 10}


def init_algos() -> list:
    return [a for a in st.session_state.get(IFC_ALGOS_KEY, []) if a in J.INIT_ALGOS]


def init_modes() -> list:
    return [m for m in st.session_state.get(MODES_KEY, []) if m in INIT_MODES]


def seeds():
    return st.session_state.get(SEEDS_KEY)


def ifca_build(values: dict) -> list:
    return J.init_configs(values, init_algos(), init_modes(), seeds())


def ifca_run_config(ref):
    """A link to a job: its algorithms, modes and seeds into the page's controls, its first run's config."""
    snap = S.snapshot(ref)
    if snap is None or not snap.units:
        return None
    st.session_state[IFC_ALGOS_KEY] = sorted({u.tags.get("algorithm", u.algorithm) for u in snap.units},
                                             key=lambda a: J.INIT_ALGOS.index(a) if a in J.INIT_ALGOS else 99)
    st.session_state[MODES_KEY] = [m for m in INIT_MODES if m in {u.tags.get("init") for u in snap.units}]
    found = sorted({u.tags.get("seed", 0) for u in snap.units})
    st.session_state[SEEDS_KEY] = len(found)
    return {**snap.units[0].config, "seed": found[0] if found else 0}


def ifca_link(extra: dict) -> list:
    """What a link sets on the IFCA page: algos=..., modes=..., seeds=... (refused beyond the limit), run=..."""
    notes = []
    if extra.get("algos"):
        st.session_state[IFC_ALGOS_KEY] = [a for a in split_list(extra["algos"]) if a in J.INIT_ALGOS]
    if extra.get("modes"):
        st.session_state[MODES_KEY] = [m for m in split_list(extra["modes"]) if m in INIT_MODES]
    if extra.get("seeds"):
        count, note = J.seeds_from_link(extra["seeds"])
        if note:
            notes.append(note)
        else:
            st.session_state[SEEDS_KEY] = count
    st.session_state[RUN_KEY] = extra.get("run")  # a link to a job of the page's older form
    return notes


def seeds_and_modes(panel) -> None:
    """The sweep's grid: how many seeds from which first seed, the init modes and the algorithms."""
    c1, c2 = st.columns(2)
    c1.number_input("Seeds", key=SEEDS_KEY, step=1, format="%d",
                    help="How many seeds per algorithm and init mode (each seed: new data draw and new models).")
    panel.slots["seeds"] = c1.empty()
    panel.widget("seed", c2, label="First seed")
    st.multiselect("Init modes", list(INIT_MODES), key=MODES_KEY,
                   help="same: one random model copied K times; different: K independent models; "
                        "restarts: redraw until every model wins some clients at round 0.")
    panel.slots["modes"] = st.empty()
    st.multiselect("Algorithms", J.INIT_ALGOS, key=IFC_ALGOS_KEY, format_func=algorithm_label,
                   help="Algorithms that use the init modes (from the registry).")
    panel.slots["algorithm"] = st.empty()
