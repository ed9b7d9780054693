"""The Runs page's pieces: the table of saved runs to pick from, a run's actions (open, delete after asking) and
its downloads."""
from __future__ import annotations

import json
import time

import streamlit as st

from .snapshots import LIVE
from .store import delete_job, metrics_csv
from .tables import PERCENT, pct

KINDS = {"playground": "Playground", "compare": "Compare", "ifca-init": "IFCA init", "cli": "CLI"}


def kind_order(kind: str) -> int:
    return list(KINDS).index(kind) if kind in KINDS else 9


def matches(row, text: str) -> bool:
    """Whether a run's row holds the search text (anywhere in its id, title, algorithm or data)."""
    return not text or text.lower() in f"{row.ref} {row.title} {row.algorithm} {row.dataset} {row.partition}".lower()


def pick(rows, key: str):
    """The runs as a table with single-row selection; the reference of the selected row, None when none is."""
    table = [{
        "started": time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created)), "from": KINDS.get(r.kind, r.kind),
        "run": r.title, "algorithm": r.algorithm, "data": f"{r.dataset} / {r.partition}", "status": r.status,
        "rounds": r.rounds, "final accuracy": pct(r.final_accuracy), "final ARI": r.final_ari, "id": r.ref,
    } for r in rows]
    event = st.dataframe(table, hide_index=True, width="stretch", height=min(360, 36 * (len(table) + 1)),
                         on_select="rerun", selection_mode="single-row", key=key, column_config={
                             "final accuracy": st.column_config.NumberColumn(format=PERCENT),
                             "final ARI": st.column_config.NumberColumn(format="%.3f"),
                             "id": st.column_config.TextColumn("id", width="small"),
                         })
    st.caption("Select a row to reopen the run below. Status: finished, stopped (by you), failed (with its error), "
               "interrupted (the process ended before it did; every finished round is kept).")
    picked = event.selection.rows if event and event.selection else []
    return rows[picked[0]].ref if picked else None


def delete_action(where, snap, job_id: str, manager, key: str, on_deleted) -> None:
    """Delete… (disabled while the job is live), then a confirmation naming the folder; `on_deleted()` after."""
    confirm = f"{key}.confirm"
    if st.session_state.get(confirm) == job_id:
        st.warning(f"Delete `{manager.root / job_id}`" +
                   (f" and all {len(snap.units)} runs in it" if len(snap.units) > 1 else "") +
                   " from disk? This cannot be undone.", icon=":material/delete:")
        y, n = st.columns(2)
        if y.button("Yes, delete", key=f"{key}.yes", type="primary", width="stretch"):
            done = delete_job(manager.root, job_id)
            manager.forget(job_id)
            st.session_state.pop(confirm, None)
            on_deleted()
            st.toast("Deleted." if done else "Nothing to delete.", icon=":material/delete:")
            st.rerun()
        if n.button("Cancel", key=f"{key}.no", width="stretch"):
            st.session_state.pop(confirm, None)
            st.rerun()
    elif where.button("Delete…", key=f"{key}.delete", icon=":material/delete:", disabled=snap.live, width="stretch",
                      help=("Stop the run first." if snap.status in LIVE else
                            "It is still being written by another process." if snap.live else
                            "Remove this run's folder" + (" and the other runs beside it" if len(snap.units) > 1
                                                          else "") + " (asks to confirm).")):
        st.session_state[confirm] = job_id
        st.rerun()


def downloads(unit, ref: str, key: str) -> None:
    """Per-round metrics (CSV), the config and, once it ended, the summary (JSON) of one run."""
    e1, e2, e3 = st.columns(3)
    name = ref.replace("/", "_")
    dl = dict(icon=":material/download:", width="stretch")
    e1.download_button("Per-round metrics (CSV)", metrics_csv(unit.records), f"{name}-rounds.csv", "text/csv",
                       key=f"{key}.dl_csv", **dl)
    e2.download_button("Config (JSON)", json.dumps(unit.config, indent=1, sort_keys=True), f"{name}-config.json",
                       "application/json", key=f"{key}.dl_json", **dl)
    if unit.summary:
        e3.download_button("Summary (JSON)", json.dumps(unit.summary, indent=1, sort_keys=True),
                           f"{name}-summary.json", "application/json", key=f"{key}.dl_summary", **dl)
