"""CFL Lab: a live lab for clustered federated learning. `make run` (or `streamlit run app.py`).

This entry point sets the page up and routes to the pages; the Playground is the landing page.
"""
import streamlit as st

st.set_page_config(page_title="CFL Lab", page_icon=":material/hub:", layout="wide",
                   initial_sidebar_state="expanded")

from cfl_ui.charts.theme import apply_theme, presenting  # noqa: E402  (after set_page_config)

from cfl_core.plugins import plugin_problems  # noqa: E402

apply_theme()
for problem in plugin_problems():  # an installed plugin that was left out: said on every page, never a crash
    (st if presenting() else st.sidebar).warning(problem.message, icon=":material/extension_off:")
# presenter mode hides the sidebar, and with it the pages' menu: the menu moves to the bar at the top
navigation = st.navigation(position="top" if presenting() else "sidebar", pages=[
    st.Page("pages/playground.py", title="Playground", icon=":material/science:", default=True),
    st.Page("pages/lessons.py", title="Lessons", icon=":material/school:", url_path="lessons"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("pages/ifca_init.py", title="IFCA initialisation", icon=":material/casino:", url_path="ifca-init"),
    st.Page("pages/partitions.py", title="Partitions", icon=":material/grid_view:", url_path="partitions"),
    st.Page("pages/runs.py", title="Runs", icon=":material/folder_open:", url_path="runs"),
    st.Page("pages/sweeps.py", title="Sweeps", icon=":material/grid_on:", url_path="sweeps"),
])
navigation.run()
