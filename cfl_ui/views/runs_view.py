"""The Runs page's pieces: the table of saved runs to pick from (a sweep as one row, its runs in a table of their
own when it is picked), a run's actions (open, resume, delete after asking, each for its owner only, with the reason
shown to everyone else), a sweep's (cfl_ui.views.sweep_controls) and its downloads."""
from __future__ import annotations

import time

import streamlit as st

from ..form import session as S
from ..charts.literal import code, md
from ..jobs.snapshots import LIVE
from ..jobs.store import delete_job, job_owner
from ..charts.tables import PERCENT, pct

KINDS = {"playground": "Playground", "lesson": "Lesson", "compare": "Compare", "ifca-init": "IFCA init",
         "sweep": "Sweep", "sweeps": "Sweeps", "cli": "CLI"}


def whole_side_by_side(rows) -> list:
    """The rows with a Playground side-by-side job as one row (both algorithms; it reopens whole), not two halves."""
    from dataclasses import replace

    out, seen = [], {}
    for r in rows:
        if r.kind != "playground" or r.ref == r.job:
            out.append(r)
            continue
        if r.job in seen:
            first = out[seen[r.job]]
            out[seen[r.job]] = replace(first, algorithm=f"{first.algorithm} vs {r.algorithm}",
                                       status=first.status if first.status == r.status else f"{first.status} / "
                                       f"{r.status}", final_accuracy=None, final_ari=None)
            continue
        seen[r.job] = len(out)
        out.append(replace(r, ref=r.job, title=r.title.split(" · ")[0]))
    return out


def kind_order(kind: str) -> int:
    return list(KINDS).index(kind) if kind in KINDS else 9


def matches(row, text: str, runs=()) -> bool:
    """Whether a run's row (or one of `runs`, a sweep's) holds the search text (anywhere in its id, title,
    algorithm or data)."""
    return not text or any(text.lower() in f"{r.ref} {r.title} {r.algorithm} {r.dataset} {r.partition}".lower()
                           for r in (row, *runs))


def sweep_panel(row, runs: list, key: str, on_deleted) -> str | None:
    """A sweep picked in the table: its state, its owner's Stop / Resume / Delete (the reason for everyone else), a
    link to it on the Sweeps page, and its runs as a table; the reference of the run picked there, if any."""
    from cfl_core.sweep.status import sweep_status

    from ..jobs.run_refs import runs_dir
    from .sweep_controls import sweep_actions

    st.divider()
    st.markdown(f"### {md(row.title)}  \n{code(row.ref)} — {md(row.status)}, {md(row.rounds)} finished")
    sweep_actions(row.ref, sweep_status(runs_dir() / row.ref), f"{key}.sweep", on_deleted=on_deleted)
    st.page_link("pages/sweeps.py", label="Open in Sweeps (its grid of results)", icon=":material/grid_on:",
                 query_params={"sweep": row.ref})
    st.markdown(f"**Its {len(runs)} runs** — select one to open it below")
    return pick(runs, f"{key}.sweep_runs.{row.ref}") if runs else None


def pick(rows, key: str):
    """The runs as a table with single-row selection; the reference of the selected row, None when none is."""
    table = [{
        "started": time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created)), "from": KINDS.get(r.kind, r.kind),
        "run": r.title, "algorithm": r.algorithm, "data": f"{r.dataset} / {r.partition}", "status": r.status,
        "rounds": r.rounds, "final accuracy": pct(r.final_accuracy), "final ARI": r.final_ari, "id": r.ref,
        "problem": r.problem,
    } for r in rows]
    event = st.dataframe(table, hide_index=True, width="stretch", height=min(360, 36 * (len(table) + 1)),
                         on_select="rerun", selection_mode="single-row", key=key, column_config={
                             "final accuracy": st.column_config.NumberColumn(format=PERCENT),
                             "final ARI": st.column_config.NumberColumn(format="%.3f"),
                             "id": st.column_config.TextColumn("id", width="small"),
                         })
    st.caption("Select a row to reopen the run below. Status: finished, stopped (by you), failed (with its error), "
               "diverged (its training blew up; the rounds before are kept), interrupted (the process ended before it "
               "did; every finished round is kept, and its owner can resume it), damaged (a file of its folder "
               "cannot be read: the reason is in the last column).")
    picked = event.selection.rows if event and event.selection else []
    return rows[picked[0]].ref if picked else None


def ownership_note(snap) -> None:
    """Why this browser may only look at the run (a shared link, or a run of the command line), if so."""
    reason = S.why_not_owner(snap)
    if reason:
        st.caption(":material/visibility: " + reason)
    elif S.owned_by_session_only():
        st.caption(":material/info: This browser sent no session cookie, so its runs are its own only until this tab "
                   "is closed or reloaded.")


def _confirm_delete(manager, job_id: str, key: str, on_deleted) -> None:
    """The "Yes, delete" callback: checks again who may delete (a stale or forged page gets nothing)."""
    st.session_state.pop(f"{key}.confirm", None)
    snap = manager.snapshot(job_id)
    mine = snap is not None and not S.why_not_delete(snap) and job_owner(manager.root, job_id) == S.owner()
    done = mine and delete_job(manager.root, job_id)
    if done:
        manager.forget(job_id)
        on_deleted()
    st.session_state[f"{key}.toast"] = "Deleted." if done else "Not deleted: only the browser that started an ended run " \
                                                                "may delete it."


def delete_action(where, snap, job_id: str, manager, key: str, on_deleted) -> None:
    """Delete… for the run's owner once it has ended (disabled, with the reason, for everyone else), then a
    confirmation naming the folder; `on_deleted()` after."""
    confirm = f"{key}.confirm"
    toast = st.session_state.pop(f"{key}.toast", None)
    if toast:
        st.toast(toast, icon=":material/delete:")
    reason = S.why_not_delete(snap)
    if st.session_state.get(confirm) == job_id and not reason:
        st.warning(f"Delete {code(manager.root / job_id)}" +
                   (f" and all {len(snap.units)} runs in it" if len(snap.units) > 1 else "") +
                   " from disk? This cannot be undone.", icon=":material/delete:")
        y, n = st.columns(2)
        y.button("Yes, delete", key=f"{key}.yes", type="primary", width="stretch",
                 on_click=_confirm_delete, args=(manager, job_id, key, on_deleted))
        if n.button("Cancel", key=f"{key}.no", width="stretch"):
            st.session_state.pop(confirm, None)
            st.rerun()
    elif where.button("Delete…", key=f"{key}.delete", icon=":material/delete:", disabled=reason is not None,
                      width="stretch",
                      help=reason or ("Remove this run's folder" + (" and the other runs beside it"
                                                                     if len(snap.units) > 1 else "") +
                                      " (asks to confirm).")):
        st.session_state[confirm] = job_id
        st.rerun()


def _resume(manager, job_id: str, key: str) -> None:
    try:
        manager.resume(job_id, S.owner())
        S.remember(job_id)
        st.session_state[f"{key}.toast"] = "Resumed from the last finished round."
    except ValueError as exc:  # checked again here: not the owner, already running, nothing left
        st.session_state[f"{key}.toast"] = f"Not resumed: {exc}"


def resume_action(where, snap, job_id: str, manager, key: str) -> None:
    """Resume an interrupted or stopped run from its last finished round (its owner only; others see why not)."""
    if snap.status not in ("interrupted", "stopped") or snap.status in LIVE:
        return
    reason = S.why_not_resume(snap)
    where.button("Resume", key=f"{key}.resume", icon=":material/play_arrow:", disabled=reason is not None,
                 width="stretch", on_click=_resume, args=(manager, job_id, key),
                 help=reason[0].upper() + reason[1:] if reason else
                 "Continue from the last finished round: the records will be those of a run that never stopped.")


def show_new_kinds(kinds: list, key: str) -> None:
    """A kind of run that appeared since the filter was last drawn is selected too (a filter first drawn over
    an empty runs folder would otherwise hide every run made afterwards); kinds that are gone are dropped."""
    seen_key = key + "._seen"
    if key in st.session_state:
        seen = st.session_state.get(seen_key, [])
        kept = [k for k in st.session_state[key] if k in kinds]
        st.session_state[key] = kept + [k for k in kinds if k not in seen and k not in kept]
    st.session_state[seen_key] = list(kinds)
