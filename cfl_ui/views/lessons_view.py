"""The Lessons page's drawing: a lesson's prepared run, its steps with Back/Next and a link each, and the player
that moves round by round to the round a step is about, then pauses there with the step's annotation on the chart.

The run is prepared once per server (every browser opening a lesson shares it), from the lesson's config. The
player advances one round per redraw (about twice a second in a browser: the fragment's timer), so a test can
play a lesson by redrawing the page.
"""
from __future__ import annotations

import textwrap

import streamlit as st

from ..charts import figures as F
from ..form import session as S
from ..charts.draw import chart, legend_rows, run_identity
from ..charts.theme import figure_scale
from .lessons import (BY_ID, CURVES, EMBEDDING, HEATMAP, LESSONS, PRIVACY, UNSEEN, lesson_embedding, missing,
                      unit_specs, upto)
from .run_charts import series_of
from ..jobs.snapshots import LOCKSTEP
from ..form.url_sync import app_url

TICK = 0.5  # seconds per round while a step plays
# the page's two columns: the step's words, Next and the note | the step's chart. Half and half for one chart (the
# 2-model picture's long step and note fit beside it at 1366x768 in presenter mode only so: assets/present/walk.py);
# 2 to 3 for two heatmaps side by side (at 1366 px beside the sidebar each keeps its 280 px, cfl_ui.charts.theme)
HALVES, WIDE_CHARTS = [1, 1], [2, 3]
HEATMAP_PX = 230  # a lesson's heatmap: two stacked in an 800-px window stay on a 900-px screen


def layout(step) -> list:
    """The page's column widths for `step`."""
    return WIDE_CHARTS if step.chart == HEATMAP else HALVES
HEAD = "les.head"  # the round the player shows, per lesson


@st.cache_resource(show_spinner=False)
def _prepared() -> dict:
    """lesson id -> job id of its prepared run, shared by every session of this server."""
    return {}


def lesson_run(lesson) -> str:
    """The job id of the lesson's run: the prepared one while it exists, else a new one (submitted now)."""
    from ..jobs.snapshots import UnitSpec

    jobs = _prepared()
    ref = jobs.get(lesson.id)
    if ref is None or S.snapshot(ref) is None:
        units = [UnitSpec(name, cfg, label) for name, cfg, label in unit_specs(lesson)]
        job = S.manager().submit(units, kind="lesson", title=f"Lesson: {lesson.title}", owner=S.owner(),
                                 schedule=LOCKSTEP, start="run")
        jobs[lesson.id] = ref = job.id
    S.remember(ref)
    return ref


def step_link(lesson, index: int) -> str:
    return app_url({"lesson": lesson.id, "step": index + 1}, page="lessons")


def _wrap(text: str, width: int = 54) -> str:  # 54 characters of 13-px text fit the chart of an 800-px window
    return "<br>".join(textwrap.wrap(text, width))


def _annotate(fig, note: str | None, rnd: int | None, vline: bool):
    """The step's note in a box above the plot (and a line at its round on round axes)."""
    if vline and rnd is not None:
        fig.add_vline(x=rnd, line=dict(color="#d9a400", width=2, dash="dot"))
    if note:
        lines = _wrap(note).count("<br>") + 1
        legend = fig.layout.legend
        names = [t for t in fig.data if t.showlegend is not False and t.name]
        # above a legend on the plot's top edge (the curves'), not over it: the box sits that many pixels higher
        legend_px = (22 * legend_rows(fig) if fig.layout.showlegend is not False and len(names) > 1
                     and legend.orientation == "h" and (legend.y or 0) >= 1 else 0)
        top = 30 + 19 * lines + legend_px
        fig.update_layout(margin=dict(t=top))
        plot_h = max(1, (fig.layout.height or 450) - top - (fig.layout.margin.b or 0))
        fig.add_annotation(text=_wrap(note), xref="paper", yref="paper", x=0, y=1 + (legend_px + 6) / plot_h,
                           xanchor="left", yanchor="bottom", showarrow=False, align="left", bgcolor="#fff7e0",
                           bordercolor="#d9a400", borderpad=5, font=dict(size=13, color="#3d3000"))
    return fig


def step_figures(lesson, step, units, rnd: int, note: str | None, fit: float = 1.0) -> list:
    """What step `step` draws at round `rnd`: [(key suffix, title, figure builder)], or a string saying why
    nothing can be drawn yet. The lesson-claim tests check the notes against exactly these figures (the page shows
    the note beside the chart, not on it: `note` None; an export of the figure with its note gives one).

    fit: the embedding's and the curves' heights times this (presenter mode draws figures PRESENT_SCALE times larger:
    1 / that keeps them as tall as in a plain window, so a step's chart stays on a 768-px screen)."""
    if step.chart == EMBEDDING:
        u = units[step.unit]
        emb = lesson_embedding(u, rnd, cache_key=run_identity(u))
        if emb is None or all(f.round != rnd for f in emb.frames):
            return f"{u.label} has measured no loss vectors by round {rnd} (its first round assigns at random)."
        return [("emb", f"**How {u.label} sees the clients** · round {rnd}", lambda: _annotate(
            F.embedding_figure(emb, rnd, height=int(440 * fit), animate=False), note, None, False))]
    if step.chart == CURVES:
        series = [F.Series(s.label, tuple(upto(u, rnd)), s.color) for s, u in zip(series_of(units), units)]
        title = f"**{'Accuracy' if step.metric == 'accuracy' else 'Clusters found (ARI)'} up to round {rnd}**"
        target = 0.9 if step.metric == "ari" else None
        return [("curves", title, lambda: _annotate(F.metric_figure(
            series, [step.metric], height=int(380 * fit), target=target), note, rnd, True))]
    if step.chart == PRIVACY:
        from ..charts.condition_figures import privacy_figure
        from .lessons_conditions import privacy_points

        points = privacy_points(units, rnd)
        if sum(len(rows) for rows in points.values()) < len(units):  # a run has not recorded this round yet
            return f"The runs are finishing round {rnd}…"
        return [("privacy", f"**Clusters found (ARI) and accuracy against ε** · round {rnd}",
                 lambda: _annotate(privacy_figure(points, height=int(380 * fit)), note, None, False))]
    if step.chart == UNSEEN:
        from ..charts.condition_figures import unseen_figure
        from .lessons_conditions import label, unseen_of

        if any(unseen_of(u, rnd) is None for u in units):  # a run of the batch has not recorded this round yet
            return f"The unseen clients of round {rnd} are being assigned…"

        def unseen(u, i):
            rec = next(r for r in u.records if r.round == rnd)
            return _annotate(unseen_figure(unseen_of(u, rnd) or {}, max(rec.assignments, default=0) + 1, rec.accuracy,
                                           rec.ari, height=int(HEATMAP_PX * fit)),
                             note if i == 0 else None, None, False)

        return [(f"unseen{i}", f"**Unseen clients** · {label(u.algorithm)} · round {rnd}",
                 lambda u=u, i=i: unseen(u, i)) for i, u in enumerate(units)]
    # heatmaps keep the rows in the order of the lesson's first round (the order its first step showed)
    def heatmap(u, i):
        order = u.records[0] if u.records else None
        return _annotate(F.assignment_heatmap(upto(u, rnd), height=int(HEATMAP_PX * fit), order_by=order),
                         note if i == 0 else None, None, False)

    return [(f"heat{i}", f"**Who trains which model** · {u.label}", lambda u=u, i=i: heatmap(u, i))
            for i, u in enumerate(units)]


def step_chart(lesson, step, units, rnd: int, note: str | None, key: str, badge: str = "") -> None:
    """The step's chart at round `rnd` (with `note` on it when one is given); `badge` (the player's state)
    heads the first chart's title, on its line (a line less between the step's words and its chart)."""
    fit = 1 / figure_scale()
    tag = ("lesson", lesson.id, step.title, tuple(u.ref for u in units), rnd, note, fit)
    drawn = step_figures(lesson, step, units, rnd, note, fit)
    if isinstance(drawn, str):
        if badge:
            st.markdown(badge)
        st.info(drawn, icon=":material/hourglass_top:")
        return
    cols = st.columns(len(drawn)) if len(drawn) > 1 else [st.container()]
    for i, (col, (suffix, title, build)) in enumerate(zip(cols, drawn)):
        # marked: two heatmaps keep side by side in a narrower column than other charts (cfl_ui.charts.theme)
        with col, st.container(key=f"cfl-lesson-{suffix}"):
            chart(build, f"{key}.{suffix}", cache=(*tag, suffix), title=f"{badge} {title}" if badge and i == 0
                  else title)


def _advance(lesson, step, units) -> tuple[int | None, int | None, bool]:
    """One round further: (the round shown, the round the step is about, whether the player has arrived)."""
    target = step.when(units)
    head = st.session_state.get(HEAD, {}).get(lesson.id)
    done = min((u.records[-1].round for u in units if u.records), default=None)
    if head is None:
        head = 0
    if target is not None and head > target:
        head = target
    if target is None:
        arrived = False
        head = None if done is None else min(head + 1, done)
    elif head < target:
        head = min(head + 1, target, done if done is not None else target)
        arrived = head == target
    else:
        arrived = True
    st.session_state.setdefault(HEAD, {})[lesson.id] = head
    return head, target, arrived


def play_step(lesson, index: int, key: str, note_slot=None) -> None:
    """Draw step `index` of the lesson, playing towards its round and pausing there.

    The chart goes where this is called; the step's note, once the player has arrived, into `note_slot` (beside
    the step's words and its Next button: pages/lessons.py), else under the chart. The player's rounds
    are redrawn by a fragment; arriving reruns the whole page, which draws the note (a fragment draws only its
    own part of the page)."""
    step = lesson.steps[index]
    ref = lesson_run(lesson)

    def body(polling: bool) -> None:
        snap = S.snapshot(ref)
        units = list(snap.units) if snap else []
        if not units:
            st.warning("The lesson's run is gone (deleted?): open the lesson again to prepare it anew.")
            return
        head, target, arrived = _advance(lesson, step, units)
        if head is None:
            st.info("Preparing the lesson's run: the first round appears in a moment…",
                    icon=":material/hourglass_top:")
            return
        note = step.note(units, target) if arrived else None
        badge = (f":green-badge[:material/pause: step {index + 1} paused at round {target}]" if arrived else
                 f":blue-badge[:material/play_arrow: playing · round {head}]" +
                 ("" if target is not None else " · the run is still training"))
        step_chart(lesson, step, units, head, None, key, badge=badge)  # the note beside the chart: in note_slot
        if arrived:
            if polling:
                st.rerun()  # draw the page once more, without the timer (and with the note beside the chart)
            (note_slot or st.container()).success(f"**Round {target}.** {note}", icon=":material/lightbulb:")

    snap = S.snapshot(ref)
    units = list(snap.units) if snap else []
    target = step.when(units) if units else None
    if target is not None and st.session_state.get(HEAD, {}).get(lesson.id) == target:
        body(False)
    else:
        st.fragment(lambda: body(True), run_every=TICK)()


def replay(lesson, index: int) -> None:
    """Start the step again from the round the step before it is about (round 0 for the first)."""
    if missing(lesson):
        return
    units = list(S.snapshot(lesson_run(lesson)).units)
    prev = lesson.steps[index - 1].when(units) if index > 0 else None
    st.session_state.setdefault(HEAD, {})[lesson.id] = prev if prev is not None else 0


def jump(lesson, index: int) -> None:
    """Show step `index` at once (Back, or a link): the player starts at its round."""
    if missing(lesson):
        return
    units = list(S.snapshot(lesson_run(lesson)).units)
    target = lesson.steps[index].when(units)
    st.session_state.setdefault(HEAD, {})[lesson.id] = target


def unavailable(lesson) -> bool:
    gone = missing(lesson)
    if gone:
        st.info(f"This lesson needs the algorithms {', '.join(gone)}, which are not installed in this version of "
                "CFL Lab (they arrive with the k-FED/PACFL update). The other lessons work as they are.",
                icon=":material/info:")
    return bool(gone)


__all__ = ["LESSONS", "BY_ID", "play_step", "replay", "jump", "unavailable", "step_link"]
