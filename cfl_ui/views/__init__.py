"""Page pieces, the top layer (imports every layer below it; pages/ imports these).

    live_view, run_charts, export_view   a job's status and charts, kept live; its exports
    algorithm_views, drilldown           per-algorithm views and "why did this client move" (both registered)
    playground_view, compare_view        the Playground's and Compare's bodies
    ifca_sweep, ifca_view                the IFCA page's sweep and results
    lessons, lessons_view                the guided walk-throughs and their player
    partition_charts, runs_view, sweeps  the Partitions, Runs and Sweeps pages' pieces
"""
