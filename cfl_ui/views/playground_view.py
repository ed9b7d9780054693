"""The Playground's body: the run it shows (live, or read back from disk), or before its first run what is about to
be trained, the clients themselves, and what the charts will show."""
from __future__ import annotations

import json

import streamlit as st

from ..charts.literal import code
from ..charts.partition_facts import PARTITION_KEYS
from ..form.controls import algorithm_label, values
from ..form.page_choices import PG, vs_choice
from ..form.verdicts import not_ready
from ..jobs.run_refs import runs_dir
from ..jobs.snapshots import ELSEWHERE
from .live_view import live_view
from .partition_charts import preview


def other_clients(snap, unit_name: str | None, form: dict) -> bool:
    """Whether the form's data set or partition settings differ from those of the run shown (the unit a link
    names, e.g. one seed of a sweep; else the first: runs side by side share their clients)."""
    unit = (snap.unit(unit_name) if unit_name else None) or (snap.units[0] if snap.units else None)
    shown = unit.config if unit is not None else {}
    return any(k in form and k in shown and form[k] != shown[k] for k in PARTITION_KEYS)


SHOWN_WITH = f"{PG}.shown_with"  # (the run shown, what the form would run when it was first shown)


def would_run(ctl) -> str:
    """What Run would train now, as text: the configs the form builds (every setting that reaches a run, and
    only those: an option of an algorithm not chosen is not in them), or the raw form where it cannot build."""
    try:
        shown = [c.to_dict() for c in ctl.build(values(PG))]
    except (TypeError, ValueError):  # ConfigError is a ValueError: the form as it is
        shown = {"form": values(PG), "vs": vs_choice()}
    return json.dumps(shown, sort_keys=True, default=str)


def settings_changed(ctl, snap) -> bool:
    """Whether a setting was changed since the run was first shown here (by Run, a link or Runs): Run would now
    train something else. The form as it was then is the reference, not the run's own config, so a link whose
    run the form cannot hold exactly (a CLI run's values) still shows that run until a setting is changed."""
    now = would_run(ctl)
    seen = st.session_state.get(SHOWN_WITH)
    if seen is None or seen[0] != ctl.ref:
        st.session_state[SHOWN_WITH] = (ctl.ref, now)
        return False
    return seen[1] != now


def page_body(ctl, verdict) -> dict:
    """The run the page shows, or the setting about to run; returns what the page's link carries beside the form."""
    snap = ctl.snapshot()
    changed = snap is not None and settings_changed(ctl, snap)  # the reference taken while it trains, too
    if snap is not None and not snap.live and (changed or other_clients(snap, ctl.unit_name, values(PG))):
        # the form now describes another run (another algorithm, data set, partition, any setting): an ended run's
        # charts would show it under settings that say something else, so the page shows the new setting (the run
        # stays in Runs)
        ctl.release()
        snap = ctl.snapshot()
    if ctl.ref and snap is None:
        st.warning(f"Run {code(ctl.ref)} was not found in {code(runs_dir())} (deleted, or saved on another machine). "
                   "The settings from the link are loaded: press **Run** to reproduce it — same seed, same data, same "
                   "initial models.", icon=":material/link:")
    if snap is not None:
        if snap.from_disk and snap.status != ELSEWHERE:
            st.caption("Opened from disk (read-only): this run is not running in this server. Press **Run** to run "
                       "the same settings again.")
        live_view(ctl.ref, ctl.unit_name, f"{PG}.view", initial_status=snap.status)
    else:
        ready(values(PG), vs_choice(), f"{PG}.preview", blocked=verdict.blocked)
    return {**ctl.link_extra(snap), "vs": vs_choice()}


def ready(values: dict, vs: str | None, key: str, *, blocked: str | None) -> None:
    """The setting in one sentence, sample images of its clusters (when the form can run) and a reading guide;
    `blocked` (why Run is disabled) replaces "Ready… press Run" by what to fix."""
    from cfl_core.partition import PARTITION_HELP

    st.page_link("pages/lessons.py", label="New here? Start with a guided lesson: five short walk-throughs that "
                 "play themselves", icon=":material/school:")
    k_hat = values.get("models")
    who = algorithm_label(values.get("algorithm")) + (f" and {algorithm_label(vs)} side by side" if vs else "")
    if blocked:
        not_ready(blocked)
    else:
        st.info(
            f"**Ready.** {values.get('clusters')} × {values.get('clients_per_cluster')} clients on "
            f"**{values.get('dataset')}** — *{values.get('partition')}*: "
            f"{PARTITION_HELP.get(values.get('partition'), '')}. "
            f"{who}" + (f" with {k_hat} models" if k_hat else "") + f", {values.get('rounds')} rounds. "
            "Press **Run** (at the top of the sidebar, or under the title where the sidebar is hidden).",
            icon=":material/play_circle:")
    left, right = st.columns([3, 2], gap="large")
    with left:
        st.markdown("**The clients you are about to train**")
        if not blocked and not preview(values, key):
            st.caption("(no images for this data set; see the Partitions page for its clients)")
    with right:
        st.markdown("**What you will see**")
        st.markdown("- **How the algorithm sees the clients:** every client as a point placed by its loss on each "
                    "model; colour = its true cluster, symbol = the model it was given.\n"
                    "- **Who trains which model:** clients by rounds; one solid colour per cluster block means the "
                    "clusters were found, one colour everywhere is a collapse.\n"
                    "- **Accuracy and ARI:** how good each client's model is, and how well the grouping matches the "
                    "truth (ARI 1 = exact).\n\n"
                    "Every chart has a camera button (PNG) in its toolbar; the link in the sidebar reproduces "
                    "this exact run.")
