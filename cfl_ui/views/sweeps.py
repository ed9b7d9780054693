"""The Sweeps page: every sweep folder (command line or dashboard) with its progress, a grid view of its results,
and a small form that starts one from the Playground's config.

`render()` draws it all under the page's header: the start form (cfl_ui.form.sweep_form's spec, started by
cfl_ui.jobs.sweep_launch), the list of sweeps with a live progress bar for running ones, and the chosen sweep's
heatmap (cfl_ui.charts.sweep_grid), its cells and their runs, each one click from the Playground.
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import streamlit as st

from cfl_core.errors import ConfigError
from cfl_core.files import TABLE_LIMIT, read_text
from cfl_core.protocols import PROTOCOLS
from cfl_core.sweep import SweepSpec
from cfl_core.sweep.folder import RESULTS_FILE, SWEEP_FILE
from cfl_core.sweep.status import RUNNING, list_sweeps, load_sweep
from cfl_core.sweep.tables import GRID_MEASURES, grid_cells, protocol_note, protocols_in

from ..charts.draw import chart
from ..charts.literal import code, md
from ..charts.sweep_grid import cell_rows, heatmap_figure
from ..form import session as S
from ..form.controls import default_config
from ..form.sweep_form import form_spec, sweepable_fields
from ..jobs.run_refs import runs_dir, slug
from ..jobs.sweep_launch import MAX_PAGE_POINTS, default_workers, start_sweep, time_estimate

P = "sweeps"
SEL_KEY = f"{P}.selected"
REFRESH_S = 2.0


def duration(seconds) -> str:
    if seconds is None:
        return ""
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def listing(root: Path):
    """Every sweep folder's status, and the table's rows."""
    statuses = list_sweeps(root)
    # a damaged sweep is listed with the reason (the table shows text as it is: no markup)
    rows = [{"sweep": str(s.folder.relative_to(root)), "state": s.listed_state, "done": f"{s.finished}/{s.points}",
             "failed": s.failed, "running": s.running, "ETA": duration(s.eta_seconds),
             "problem": "; ".join(s.problems)[:300]} for s in statuses]
    return statuses, rows


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
        problem = None
        spec = points = None
        try:
            spec = form_spec(slug(name), base, grid_text)
            expansion = SweepSpec.from_dict(spec).expand(max_points=MAX_PAGE_POINTS)
            points = expansion.points
            if expansion.invalid:
                problem = expansion.report(limit=5)
            elif (root / "sweeps" / slug(name) / SWEEP_FILE).exists():
                problem = f"A sweep named {slug(name)} exists: choose another name."
        except ConfigError as exc:
            problem = str(exc)
        if points is not None and not problem:
            workers = default_workers()
            st.markdown(f"**{len(points)} points**, {time_estimate([p.config for p in points], workers)}.")
        elif problem:
            st.error(problem, icon=":material/error:")
        if st.button("Start sweep", type="primary", disabled=bool(problem) or not points, key=f"{P}.start"):
            folder = root / "sweeps" / slug(name)
            start_sweep(spec, folder)
            st.session_state[SEL_KEY] = str(folder.relative_to(root))
            st.toast(f"Sweep {slug(name)} started ({len(points)} runs).")
            time.sleep(0.5)
            return True
    return False


def progress_panel(root: Path, statuses) -> None:
    """A progress bar per running sweep, redrawn every REFRESH_S seconds while any runs."""
    @st.fragment(run_every=REFRESH_S if any(s.state == RUNNING for s in statuses) else None)
    def panel():
        for s in list_sweeps(root):
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
    if saved is None:  # removed since the listing
        st.info(f"The sweep {code(chosen)} is gone.", icon=":material/folder_off:")
        st.stop()
    status = saved.status
    # the name and description are the spec's text: shown literally (a link or an image in them stays text)
    st.markdown(f"### {md(status.name)}  \n{code(chosen)} — {status.listed_state}, {status.finished} of "
                f"{status.points} finished" + (f", {status.failed} failed" if status.failed else ""))
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


def render() -> None:
    """The page under its header: the start form, the sweeps and their progress, the chosen sweep's results."""
    root = runs_dir()
    statuses, rows = listing(root)
    if start_form(root, expanded=not rows):
        statuses, rows = listing(root)
    if not rows:
        st.info("No sweeps yet. Start one above, or from a terminal: "
                "`python -m cfl_core sweep sweeps/digits-same-init.yaml --out runs/sweeps/digits-same-init`.",
                icon=":material/grid_on:")
        st.stop()
    progress_panel(root, statuses)
    table = st.dataframe(pd.DataFrame(rows), key=f"{P}.table", on_select="rerun", selection_mode="single-row",
                         hide_index=True, width="stretch")
    picked = picked_row(table)
    if picked:
        st.session_state[SEL_KEY] = rows[picked[0]]["sweep"]
    chosen = st.session_state.get(SEL_KEY) or rows[0]["sweep"]
    if chosen not in {r["sweep"] for r in rows}:
        chosen = rows[0]["sweep"]
    sweep_results(root, chosen)
