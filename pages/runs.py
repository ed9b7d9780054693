"""Runs: every saved run (also those started from the CLI), reopened with all the Playground's charts."""
import json
import time

import streamlit as st

from cfl_ui import session as S
from cfl_ui.live_view import live_view
from cfl_ui.paths import parse_ref, runs_dir
from cfl_ui.snapshots import LIVE
from cfl_ui.store import delete_job, metrics_csv
from cfl_ui.tables import PERCENT, pct
from cfl_ui.theme import page_header

P = "runs"
SEL_KEY = f"{P}.selected"
KINDS = {"playground": "Playground", "compare": "Compare", "ifca-init": "IFCA init", "cli": "CLI"}

page_header("Runs",
            f"Every run saved in `{runs_dir()}` — yours and those started from the command line — with all the "
            "Playground's charts, exports, and delete.")

manager = S.manager()
rows, hidden = S.visible_runs()

url_ref = st.query_params.get("run")
if url_ref and parse_ref(url_ref) and st.session_state.get(f"{P}._url") != url_ref:
    st.session_state[SEL_KEY] = url_ref
    st.session_state[f"{P}._url"] = url_ref
    S.remember(url_ref)

with st.sidebar:
    st.markdown("### Filter")
    kinds = sorted({r.kind for r in rows}, key=lambda k: list(KINDS).index(k) if k in KINDS else 9)
    chosen = st.multiselect("Started from", kinds, default=kinds, format_func=lambda k: KINDS.get(k, k),
                            key=f"{P}.kinds")
    text = st.text_input("Search", key=f"{P}.search", placeholder="algorithm, data set, id…")
    st.caption(f"{len(rows)} runs here" + (f"; {hidden} from other browsers are hidden (open them by their link)"
                                             if hidden else "") + ".")

shown = [r for r in rows if r.kind in chosen and (not text or text.lower() in
                                                    f"{r.ref} {r.title} {r.algorithm} {r.dataset} {r.partition}".lower())]
if not rows:
    st.info("No saved runs yet. Run something in the Playground, or from a terminal: "
            "`python -m cfl_core run --algorithm clove --models 4 --out runs/my-first-run`.",
            icon=":material/folder_open:")
    st.stop()

table = [{
    "started": time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created)), "from": KINDS.get(r.kind, r.kind),
    "run": r.title, "algorithm": r.algorithm, "data": f"{r.dataset} / {r.partition}", "status": r.status,
    "rounds": r.rounds, "final accuracy": pct(r.final_accuracy), "final ARI": r.final_ari, "id": r.ref,
} for r in shown]
event = st.dataframe(table, hide_index=True, width="stretch", height=min(360, 36 * (len(table) + 1)),
                     on_select="rerun", selection_mode="single-row", key=f"{P}.table", column_config={
                         "final accuracy": st.column_config.NumberColumn(format=PERCENT),
                         "final ARI": st.column_config.NumberColumn(format="%.3f"),
                         "id": st.column_config.TextColumn("id", width="small"),
                     })
st.caption("Select a row to reopen the run below. Status: finished, stopped (by you), failed (with its error), "
           "interrupted (the process ended before it did; every finished round is kept).")
picked = event.selection.rows if event and event.selection else []
if picked:
    st.session_state[SEL_KEY] = shown[picked[0]].ref
ref = st.session_state.get(SEL_KEY)
if ref not in {r.ref for r in rows}:
    ref = None
if ref is None:
    st.info("Select a run in the table to see its charts.", icon=":material/touch_app:")
    st.query_params.clear()
    st.stop()

st.query_params.from_dict({"run": ref})
snap = S.snapshot(ref)
parsed = parse_ref(ref)
if snap is None or parsed is None:
    st.warning(f"Run `{ref}` is gone.")
    st.stop()
unit = snap.unit(parsed[1]) or snap.units[0]

st.divider()
head, act = st.columns([3, 2])
head.markdown(f"### {unit.label}  \n`{ref}`")
with act:
    a1, a2 = st.columns(2)
    a1.page_link("pages/playground.py", label="Open in Playground", icon=":material/science:",
                 query_params={"run": ref})
    is_live = snap.live
    if st.session_state.get(f"{P}.confirm") == parsed[0]:
        st.warning(f"Delete `{manager.root / parsed[0]}`" +
                   (f" and all {len(snap.units)} runs in it" if len(snap.units) > 1 else "") +
                   " from disk? This cannot be undone.", icon=":material/delete:")
        y, n = st.columns(2)
        if y.button("Yes, delete", key=f"{P}.yes", type="primary", width="stretch"):
            ok = delete_job(manager.root, parsed[0])
            manager.forget(parsed[0])
            st.session_state.pop(f"{P}.confirm", None)
            st.session_state.pop(SEL_KEY, None)
            st.toast("Deleted." if ok else "Nothing to delete.", icon=":material/delete:")
            st.rerun()
        if n.button("Cancel", key=f"{P}.no", width="stretch"):
            st.session_state.pop(f"{P}.confirm", None)
            st.rerun()
    else:
        if a2.button("Delete…", key=f"{P}.delete", icon=":material/delete:", disabled=is_live, width="stretch",
                     help=("Stop the run first." if snap.status in LIVE else
                           "It is still being written by another process." if is_live else
                           "Remove this run's folder" + (" and the other runs beside it" if len(snap.units) > 1
                                                         else "") + " (asks to confirm).")):
            st.session_state[f"{P}.confirm"] = parsed[0]
            st.rerun()

e1, e2, e3 = st.columns(3)
name = ref.replace("/", "_")
e1.download_button("Per-round metrics (CSV)", metrics_csv(unit.records), f"{name}-rounds.csv", "text/csv",
                   key=f"{P}.dl_csv", icon=":material/download:", width="stretch")
e2.download_button("Config (JSON)", json.dumps(unit.config, indent=1, sort_keys=True), f"{name}-config.json",
                   "application/json", key=f"{P}.dl_json", icon=":material/download:", width="stretch")
if unit.summary:
    e3.download_button("Summary (JSON)", json.dumps(unit.summary, indent=1, sort_keys=True),
                       f"{name}-summary.json", "application/json", key=f"{P}.dl_summary",
                       icon=":material/download:", width="stretch")

live_view(ref, parsed[1] if len(snap.units) > 1 else None, f"{P}.view", initial_status=snap.status,
            exports=False)
