"""Runs: every saved run (also those started from the CLI), reopened with all the Playground's charts; a sweep is one
row, whose runs open beneath it."""
import html

import streamlit as st

from cfl_ui.views import runs_view as R
from cfl_ui.form import session as S
from cfl_ui.charts.literal import code, md
from cfl_ui.views.live_view import live_view
from cfl_ui.jobs.run_refs import parse_ref, runs_dir
from cfl_ui.charts.theme import page_header

P = "runs"
SEL_KEY = f"{P}.selected"
GEN_KEY = f"{P}.generation"


def on_deleted() -> None:
    st.session_state.pop(SEL_KEY, None)
    st.session_state[GEN_KEY] = st.session_state.get(GEN_KEY, 0) + 1

page_header("Runs",
            f"Every run saved in <code>{html.escape(str(runs_dir()))}</code> — yours and those started from the "
            "command line — with all the Playground's charts, exports, and delete.")

manager = S.manager()
url_ref = st.query_params.get("run")
if url_ref and st.session_state.get(f"{P}._url") != url_ref:
    st.session_state[f"{P}._url"] = url_ref
    if parse_ref(url_ref):
        st.session_state[SEL_KEY] = url_ref.strip()
        S.remember(url_ref)  # before listing: a link's run is listed (and shown) on its first load
        S.known().add(url_ref.strip())  # a link to a sweep (its folder) shows the sweep
    else:
        st.warning(f"run={md(repr(url_ref))} in the link was ignored (not the reference of a run).",
                   icon=":material/link:")
rows, hidden = S.visible_runs()
rows = R.whole_side_by_side(rows)

with st.sidebar:
    st.markdown("### Filter")
    top = [r for r in rows if not r.sweep]  # a sweep's runs are listed under it
    kinds = sorted({r.kind for r in top}, key=R.kind_order)
    R.show_new_kinds(kinds, f"{P}.kinds")
    chosen = st.multiselect("Started from", kinds, default=kinds, format_func=lambda k: R.KINDS.get(k, k),
                            key=f"{P}.kinds")
    text = st.text_input("Search", key=f"{P}.search", placeholder="algorithm, data set, id…")
    st.caption(f"{len(top)} runs and sweeps here" + (f"; {hidden} from other browsers are hidden (open them by their "
                                                     "link)" if hidden else "") + ".")

in_sweep = {}
for r in rows:
    if r.sweep:
        in_sweep.setdefault(r.sweep, []).append(r)
shown = [r for r in top if r.kind in chosen and R.matches(r, text, in_sweep.get(r.ref, ()) if r.kind == "sweep" else ())]
if not rows:
    st.info("No saved runs yet. Run something in the Playground, or from a terminal: "
            "`python -m cfl_core run --algorithm clove --models 4 --out runs/my-first-run`.",
            icon=":material/folder_open:")
    st.stop()

# a new table after each delete: its selection must not slide onto the run that took the deleted one's row
picked = R.pick(shown, f"{P}.table.{st.session_state.get(GEN_KEY, 0)}")
if picked:
    st.session_state[SEL_KEY] = picked
ref = st.session_state.get(SEL_KEY)
by_ref = {r.ref: r for r in rows}
group = by_ref[ref].sweep or (ref if by_ref[ref].kind == "sweep" else None) if ref in by_ref else None
if group in by_ref:  # a sweep, or a run of one (a link): the sweep, its actions and its runs' table
    inner = R.sweep_panel(by_ref[group], in_sweep.get(group, []), P, on_deleted=on_deleted)
    ref = inner or (ref if ref != group else None)
    if ref is None:
        st.query_params.from_dict({"run": group})
        st.stop()
refs = {r.ref for r in rows}
if ref not in refs:
    whole_ref = parse_ref(ref)[0] if ref and parse_ref(ref) else None
    if whole_ref in refs:
        ref = whole_ref  # a unit of a side-by-side run: the run is listed whole
    elif S.snapshot(ref) is None:
        ref = None
if ref is None:
    st.info("Select a run in the table to see its charts.", icon=":material/touch_app:")
    st.query_params.clear()
    st.stop()

st.query_params.from_dict({"run": ref})
snap = S.snapshot(ref)
parsed = parse_ref(ref)
if snap is None or parsed is None:
    st.warning(f"Run {code(ref)} is gone.")
    st.stop()
unit = snap.unit(parsed[1]) or snap.units[0]
whole = len(snap.units) > 1 and parsed[1] is None  # a side-by-side run: both algorithms, as it was shown

st.divider()
head, act = st.columns([3, 2])
head.markdown(f"### {md(snap.title) if whole else md(unit.label)}  \n{code(ref)}")
with act:
    a1, a2, a3 = st.columns(3)
    a1.page_link("pages/playground.py", label="Open in Playground", icon=":material/science:",
                 query_params={"run": ref})
    if group is None:
        R.resume_action(a2, snap, parsed[0], manager, P)
        R.delete_action(a3, snap, parsed[0], manager, P, on_deleted=on_deleted)
if group is None:
    R.ownership_note(snap)
else:
    st.caption(f":material/grid_on: A run of the sweep {code(group)}: it is stopped, resumed and deleted with the "
               "sweep (above).")

live_view(ref, parsed[1] if len(snap.units) > 1 else None, f"{P}.view", initial_status=snap.status)
