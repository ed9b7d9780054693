"""Lessons: guided walk-throughs, each a few steps over a prepared run that plays itself and pauses where it matters."""
import streamlit as st

from cfl_ui.views import lessons_view as V
from cfl_ui.charts.theme import page_header

LESSON_KEY, STEP_KEY, SEEN_KEY = "les.lesson", "les.step", "les.url"
ids = [lesson.id for lesson in V.LESSONS]

# a link (?lesson=...&step=...) opens that lesson at that step
wanted = (st.query_params.get("lesson"), st.query_params.get("step"))
if wanted != st.session_state.get(SEEN_KEY) and wanted[0] in V.BY_ID:
    st.session_state[LESSON_KEY] = wanted[0]
    try:
        st.session_state[STEP_KEY] = max(0, min(int(wanted[1] or 1) - 1, len(V.BY_ID[wanted[0]].steps) - 1))
    except ValueError:
        st.session_state[STEP_KEY] = 0
    V.jump(V.BY_ID[wanted[0]], st.session_state[STEP_KEY])
st.session_state.setdefault(LESSON_KEY, ids[0])
st.session_state.setdefault(STEP_KEY, 0)


def on_lesson() -> None:
    st.session_state[STEP_KEY] = 0
    V.replay(V.BY_ID[st.session_state[LESSON_KEY]], 0)


def go(delta: int) -> None:
    lesson = V.BY_ID[st.session_state[LESSON_KEY]]
    index = max(0, min(st.session_state[STEP_KEY] + delta, len(lesson.steps) - 1))
    st.session_state[STEP_KEY] = index
    if delta < 0:
        V.jump(lesson, index)  # Back shows the earlier step at its round at once; Next plays on


lesson = V.BY_ID[st.session_state[LESSON_KEY]]
index = st.session_state[STEP_KEY]
step = lesson.steps[index]
page_header("Lessons", "Guided walk-throughs: read a step, watch the run play to the round it is about, then press "
                       "<b>Next</b>. Every number in a note is read from the run itself.")
# the step's words, Next and the note on the left, its chart on the right: all on screen together at 1366x768 (and
# in presenter mode) without scrolling; the lesson picker in the main area, so presenter mode (no sidebar) has it
words, picture = st.columns(V.layout(step), gap="medium")
with words:
    st.selectbox("Lesson", ids, key=LESSON_KEY, format_func=lambda i: V.BY_ID[i].title, on_change=on_lesson,
                 help="Each lesson prepares its own small run once per server, then plays it for you.")
    st.caption(lesson.summary)
    if not V.unavailable(lesson):
        st.markdown(f"**Step {index + 1} of {len(lesson.steps)} · {step.title}**")
        with st.container(horizontal=True):  # buttons as wide as their words, in any window
            st.button("Back", key="les.back", icon=":material/arrow_back:", on_click=go, args=(-1,),
                      disabled=index == 0)
            st.button("Next", key="les.next", icon=":material/arrow_forward:", on_click=go, args=(1,),
                      type="primary", disabled=index == len(lesson.steps) - 1)
            st.button("Replay step", key="les.replay", icon=":material/replay:", on_click=V.replay,
                      args=(lesson, index), help="Play this step again from the round the step before it showed.")
        st.markdown(step.text)
        note_slot = st.container()
        st.markdown("Steps: " + " · ".join(f"[{i + 1}. {s.title}]({V.step_link(lesson, i)})"
                                            for i, s in enumerate(lesson.steps)))
if not V.missing(lesson):
    with picture:
        V.play_step(lesson, index, f"les.{lesson.id}.{index}", note_slot)

st.session_state[SEEN_KEY] = (lesson.id, str(index + 1))
st.query_params.update({"lesson": lesson.id, "step": str(index + 1)})
