"""The Sweeps page: the sweep folders this browser sees (its own, the command line's, those it holds a link to)
with their progress, a grid view of a sweep's results, and a small form that starts one from the Playground's config.

`render()` draws it all under the page's header: the start form (cfl_ui.form.sweep_form's spec, checked, estimated
and started by the one sweep service, cfl_ui.jobs.sweep_service, as the IFCA page's sweeps are), the list of sweeps
with a live progress bar for running ones, and the chosen sweep (`?sweep=<folder>`: a link shows it to anyone,
read-only): its owner's Stop / Resume / Delete, its heatmap (cfl_ui.charts.sweep_grid), its cells and their runs,
each one click from the Playground.
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import streamlit as st

from cfl_core.errors import ConfigError
from cfl_core.files import TABLE_LIMIT, read_text
from cfl_core.protocols import PROTOCOLS
from cfl_core.sweep.folder import RESULTS_FILE, SWEEP_FILE
from cfl_core.sweep.status import RUNNING, load_sweep
from cfl_core.sweep.tables import GRID_MEASURES, grid_cells, protocol_note, protocols_in

from ..charts.draw import chart
from ..charts.literal import code, md
from ..charts.sweep_grid import cell_rows, heatmap_figure
from ..form import session as S
from ..form.controls import default_config
from ..form.sweep_form import form_spec, sweepable_fields
from ..jobs.run_refs import runs_dir, slug
from ..jobs.sweep_pool import executor_text
from ..jobs.sweep_service import SweepRefused
from .sweep_controls import sweep_actions

P = "sweeps"
SEL_KEY = f"{P}.selected"
REFRESH_S = 2.0


def duration(seconds) -> str:
    if seconds is None:
        return ""
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def listing(root: Path):
    """The statuses of the sweep folders this browser sees, the table's rows (with this browser's sweeps queued
    here that have no folder yet), and how many sweeps of other browsers are hidden."""
    service = S.manager().sweeps
    statuses, hidden = service.listed(S.owner(), S.known())
    live = {j.rel: j for j in service.jobs(S.owner()) if j.active}
    # a damaged sweep is listed with the reason (the table shows text as it is: no markup)
    rows = []
    for s in statuses:
        rel = s.folder.relative_to(root).as_posix()
        job = live.pop(rel, None)
        rows.append({"sweep": rel, "state": "queued" if job is not None and job.state == "queued" else s.listed_state,
                     "done": f"{s.finished}/{s.points}", "failed": s.failed, "running": s.running,
                     "ETA": duration(s.eta_seconds), "problem": "; ".join(s.problems)[:300]})
    rows[:0] = [{"sweep": rel, "state": job.state, "done": f"0/{job.points}", "failed": 0, "running": 0, "ETA": "",
                 "problem": ""} for rel, job in live.items()]
    return statuses, rows, hidden


def start_form(root: Path, expanded: bool) -> bool:
    """The "Start a sweep" form; True when a sweep was started by this run."""
    with st.expander("Start a sweep", icon=":material/add:", expanded=expanded):
        base = S.shared_config() or default_config()
        st.caption("Base: the Playground's current config — " + ", ".join(
            f"{k} {base.get(k)}" for k in ("dataset", "partition", "algorithm", "rounds")) + ". Choose fields and "
            "their values (comma-separated); every combination runs.")
        fields = st.multiselect("Fields to vary", sweepable_fields(), default=["seed"], key=f"{P}.fields")
        grid_text = {}
        for name in fields:
            grid_text[name] = st.text_input(f"{name} values", key=f"{P}.values.{name}",
                                            value="0, 1, 2" if name == "seed" else str(base.get(name, "")))
        name = st.text_input("Name", value=f"sweep-{time.strftime('%Y%m%d-%H%M%S')}", key=f"{P}.name")
        service = S.manager().sweeps
        rel = f"sweeps/{slug(name)}"
        problem = spec = plan = None
        try:
            spec = form_spec(slug(name), base, grid_text)
            if (root / rel / SWEEP_FILE).exists() or service.get(rel) is not None:
                problem = f"A sweep named {slug(name)} exists: choose another name."
            else:
                plan = service.plan(spec)  # every point as the Playground checks a run: too large is refused here
        except (ConfigError, SweepRefused) as exc:
            problem = str(exc)
        if plan is not None and not problem:
            with st.spinner("Measuring a run of each algorithm here for the estimate…"):
                est = service.estimate(plan.configs, slots=plan.slots)
            st.markdown(f"**{len(plan.configs)} points**, {est.describe()} on "
                        f"{executor_text(plan.executor, plan.address)} ({plan.slots} at once).")
            st.caption(est.basis)
        elif problem:
            st.error(problem, icon=":material/error:")
        if st.button("Start sweep", type="primary", disabled=bool(problem) or plan is None, key=f"{P}.start"):
            try:  # checked again: another browser may have taken the name since
                job = service.start(spec, rel, owner=S.owner(), kind="sweeps", title=slug(name))
            except (ConfigError, SweepRefused) as exc:
                st.error(str(exc), icon=":material/error:")
                return False
            st.session_state[SEL_KEY] = rel
            st.toast(f"Sweep {slug(name)} {'queued' if job.state == 'queued' else 'started'} "
                     f"({len(plan.configs)} runs).")
            return True
    return False


def progress_panel(root: Path, statuses, rows) -> None:
    """A progress bar per running sweep this browser sees, redrawn every REFRESH_S seconds while any runs or waits."""
    waiting = any(r["state"] == "queued" for r in rows)

    @st.fragment(run_every=REFRESH_S if waiting or any(s.state == RUNNING for s in statuses) else None)
    def panel():
        for job in S.manager().sweeps.jobs(S.owner()):
            if job.active and job.state == "queued":
                st.progress(0.0, text=f"{md(job.rel)}: queued" + (f", number {job.position} in line"
                                                                   if job.position else ""))
        for s in S.manager().sweeps.listed(S.owner(), S.known())[0]:
            if s.state == RUNNING:
                st.progress((s.finished + s.failed) / max(1, s.points),
                            text=f"{md(s.folder.relative_to(root))}: {s.finished} done, {s.running} running, {s.failed} "
                                 f"failed of {s.points}" + (f", about {duration(s.eta_seconds)} left"
                                                            if s.eta_seconds else ""))

    panel()


def picked_row(table) -> list:
    return table.selection.rows if table is not None and hasattr(table, "selection") else []


def sweep_results(root: Path, chosen: str) -> None:
    """The chosen sweep: its state and command, its results as a heatmap and a table of cells, a cell's runs."""
    folder = root / chosen
    saved = load_sweep(folder)
    st.divider()
    job = S.manager().sweeps.get(chosen)
    if saved is None and job is not None and job.active:  # queued: its folder is written when it starts
        st.markdown(f"### {md(job.title)}  \n{code(chosen)} — {job.state}, {job.points} runs")
        sweep_actions(chosen, None, f"{P}.act", on_deleted=_deleted)
        st.stop()
    if saved is None:  # removed since the listing
        st.info(f"The sweep {code(chosen)} is gone.", icon=":material/folder_off:")
        st.stop()
    status = saved.status
    # the name and description are the spec's text: shown literally (a link or an image in them stays text)
    st.markdown(f"### {md(status.name)}  \n{code(chosen)} — {status.listed_state}, {status.finished} of "
                f"{status.points} finished" + (f", {status.failed} failed" if status.failed else ""))
    sweep_actions(chosen, status, f"{P}.act", on_deleted=_deleted)
    if status.description:
        st.caption(md(status.description))
    if status.problems:
        st.warning("Damaged: " + "  \n".join(md(p) for p in status.problems) + "  \nWhat could be read is shown.",
                   icon=":material/report:")
    if status.command:
        st.code(status.command, language="bash")
    if saved.results is None:
        st.info("No results yet: the table appears when the sweep's first runs are in.",
                icon=":material/hourglass_top:")
        st.stop()
    text, _ = read_text(folder / RESULTS_FILE, TABLE_LIMIT)
    st.download_button("results.csv", text or "", file_name=f"{status.name}-results.csv", mime="text/csv",
                       icon=":material/download:", key=f"{P}.csv")
    data = saved.results
    fields = [f for f in status.swept if f != "seed"] or ["algorithm"]
    c1, c2, c3 = st.columns(3)
    row_field = c1.selectbox("Rows", fields, key=f"{P}.row")
    col_choices = ["(none)"] + [f for f in fields if f != row_field]
    col_field = c2.selectbox("Columns", col_choices, index=1 if len(col_choices) > 1 else 0, key=f"{P}.col")
    col_field = None if col_field == "(none)" else col_field
    measure = c3.selectbox("Measure", list(GRID_MEASURES), format_func=GRID_MEASURES.get, key=f"{P}.measure")
    by = [row_field] + ([col_field] if col_field else [])
    cells = grid_cells(data, by)
    try:
        stamp = (folder / RESULTS_FILE).stat().st_mtime_ns
    except OSError:
        stamp = 0
    chart(lambda: heatmap_figure(cells, row_field, col_field, measure), f"{P}.heatmap",
          cache=("sweep-heatmap", str(folder), stamp, row_field, col_field, measure),
          title=f"**{GRID_MEASURES[measure]}** by {' and '.join(md(b) for b in by)} (over seeds)",
          caption="Each cell: the measure over its seeds' finished runs (mean ± std), and finished/all runs. "
                  "Success = the share of seeds whose final clustering is exactly right (ARI = 1). "
                  + protocol_note([p for p in protocols_in(data) if p in PROTOCOLS] or ["clove"]) + ".")
    st.markdown("**Mean ± std per cell** — select a row to list its runs")
    cell_table = st.dataframe(pd.DataFrame(cell_rows(cells, by)), key=f"{P}.cells", on_select="rerun",
                              selection_mode="single-row", hide_index=True, width="stretch")
    picked_cell = picked_row(cell_table)
    if picked_cell:
        cell_runs(chosen, data, cells[picked_cell[0]], by)


def cell_runs(chosen: str, data: list[dict], cell: dict, by: list[str]) -> None:
    """One cell's runs, each with its result and a link that opens it in the Playground."""
    st.markdown("Runs of " + ", ".join(f"{md(b)} = {md(cell[b])}" for b in by))
    by_folder = {r["folder"]: r for r in data}
    for run_folder in cell["folders"]:
        r = by_folder[run_folder]
        ref = f"{chosen}/{run_folder}"
        a, b = st.columns([3, 1])
        acc = f"{100 * r['final_accuracy']:.1f}%" if r["final_accuracy"] is not None else "-"
        ari = f"{r['final_ari']:.2f}" if r["final_ari"] is not None else "-"
        a.markdown(f"{code(run_folder)} — {md(r['status'])}, accuracy {acc}, ARI {ari}")
        b.page_link("pages/playground.py", label="Open in Playground", icon=":material/science:",
                    query_params={"run": ref})


def _deleted() -> None:
    st.session_state.pop(SEL_KEY, None)
    st.query_params.pop("sweep", None)


def render() -> None:
    """The page under its header: the start form, the sweeps and their progress, the chosen sweep's results."""
    root = runs_dir()
    url = st.query_params.get("sweep")
    if url and st.session_state.get(f"{P}._url") != url:  # a link: its sweep is listed and shown, read-only
        st.session_state[f"{P}._url"] = url
        S.known().add(url.strip())
        st.session_state[SEL_KEY] = url.strip()
    statuses, rows, hidden = listing(root)
    if start_form(root, expanded=not rows):
        statuses, rows, hidden = listing(root)
    if hidden:
        st.caption(f"{hidden} sweeps of other browsers are hidden (open them by their link).")
    if not rows:
        st.info("No sweeps yet. Start one above, or from a terminal: "
                "`python -m cfl_core sweep sweeps/digits-same-init.yaml --out runs/sweeps/digits-same-init`.",
                icon=":material/grid_on:")
        st.stop()
    progress_panel(root, statuses, rows)
    table = st.dataframe(pd.DataFrame(rows), key=f"{P}.table", on_select="rerun", selection_mode="single-row",
                         hide_index=True, width="stretch")
    picked = picked_row(table)
    if picked:
        st.session_state[SEL_KEY] = rows[picked[0]]["sweep"]
    chosen = st.session_state.get(SEL_KEY) or rows[0]["sweep"]
    if chosen not in {r["sweep"] for r in rows}:
        chosen = rows[0]["sweep"]
    st.query_params["sweep"] = chosen  # the page's link shows this sweep
    sweep_results(root, chosen)
