"""The jobs service, no Streamlit (the CLI, tests and benchmarks drive it too); the lowest layer of cfl_ui.

    run_refs        where runs live, job ids, and a run's reference in a URL (JOB or JOB/UNIT)
    snapshots       statuses, the unit spec and the immutable job snapshots pages read
    jobs, worker    a job stepped round by round (in a thread, or a worker process per job)
    manager         submits, queues and finds jobs; shares data set-ups between them
    store           saved runs on disk: reading jobs back, listing per owner, deleting
    estimate        memory and time of a request, and the limits;  sweep_estimate: a server-driven sweep's time
    sweep_service   the one sweep service every page starts sweeps with (owner, memory budget, queue, estimate);
                    sweep_jobs: one sweep's driver thread;  sweep_pool: the executor and the kept local pool;
                    sweep_owner: who owns a sweep folder
    poll_pace       how often the live views poll, for every session together
    umap_process    UMAP's layouts in a process of their own
"""
