"""CFL Lab's dashboard in four layers; a module imports its own layer and those below only (test_import_graph.py).
    views   page pieces: live view, run charts, algorithm views, drill-down, lessons, IFCA, sweeps, partitions, runs
    form    settings widgets, URL codec and sync, presets, verdicts, the job controller, the training-page frame
    charts  plotly figures and tables built from records; theme, palette
    jobs    no Streamlit: the job and sweep service, workers, saved runs, estimates, poll pace, UMAP's process
"""
