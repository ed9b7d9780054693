"""CFL Lab dashboard support: everything the Streamlit pages use that is not a page.

Modules that never import Streamlit (unit-testable without a session):
    paths            the runs folder, run ids and run references
    jobs             a job: experiments stepped round by round in a worker thread
    manager          the job manager: submits, queues, finds jobs and shares their data set-ups
    store            saved runs on disk (ownership, listing, deleting, exports)
    presets, params  presets and the configuration <-> URL query parameters
    estimate         memory/time estimate of a request, and the limits
    palette          colours and symbols shared by every chart
    embedding        loss-vector embeddings (raw, PCA, UMAP) cached per run and round
    figures          plotly figure builders
    algorithm_views  per-algorithm views (register yours there)
    partition_view   a partition's facts and sample images, before any training
    browser          a headless server and Debian's chromium (end-to-end test, screenshots)
Streamlit-side modules: session (the manager per process, the owner per browser), controls
(the form's fields and their values), urls (the page's state in the URL, links), panel (the
sidebar's widget groups), verdicts (validation, checks, the note under Run), preset_picker, run_view (status, charts, live
refresh, exports), jobpage (Run/Pause/Stop for batch pages), theme.
"""
