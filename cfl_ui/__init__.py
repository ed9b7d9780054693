"""CFL Lab dashboard support: everything the Streamlit pages use that is not a page.

Modules that never import Streamlit (unit-testable without a session):
    paths            the runs folder, run ids and run references
    snapshots        statuses, the unit spec and the immutable job snapshots pages read
    jobs             a job: experiments stepped round by round in a worker thread
    manager          the job manager: submits, queues, finds jobs and shares their data set-ups
    store            saved runs on disk (ownership, listing, deleting, exports)
    tables           results as table rows, percentages and CSVs
    presets, params  presets and the configuration <-> URL query parameters
    estimate         memory/time estimate of a request, and the limits
    palette          colours and symbols shared by every chart
    embedding        loss-vector embeddings (raw, PCA, UMAP) cached per run and round
    umap_process     UMAP's layouts (and its numba compiling) in a process of their own
    figures          plotly figure builders
    algorithm_views  per-algorithm views (register yours there)
    partition_view   a partition's facts and sample images, before any training
    browser          a headless server and Debian's chromium (end-to-end test, screenshots)
Streamlit-side modules:
    session          the manager per process, the owner per browser, the runs it may see
    controls         the form's fields (generated from the settings' declarations) and their values
    urls             the page's state in the URL: links in, the URL written back, the link box
    panel            the sidebar's widget groups, with a slot for each message
    verdicts         whether the form may run: validation, data set and device checks, the note under Run
    preset_picker    the preset selector
    job_specs        what each training page submits: configs and units from the form's values
    controller       one page's job and its Run / Pause / Step / Stop (every training page uses it)
    charts           the one way a chart is drawn: cached figures, the toolbar config, title and caption
    run_charts       the chart blocks of a run (headline, embedding, assignments, curves, extras, exports)
    live_view        a job's status bar and charts, refreshed while it trains
    export_view      a running job's Export section: files of the rounds so far, made when asked for
    playground_view, compare_view, ifca_view, partition_charts, runs_view   what those pages show
    theme            the page's style and header
"""
