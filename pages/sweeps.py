"""Sweeps: every sweep folder (command line or dashboard) with its progress, a grid view of its results, and a
small form that starts one from the Playground's config."""
from cfl_ui.charts.theme import page_header
from cfl_ui.views import sweeps

page_header("Sweeps",
            "Grids of runs — from <code>python -m cfl_core sweep</code> or started here — with their progress, a "
            "heatmap of any measure over two swept fields, and every run one click from the Playground.")
sweeps.render()
