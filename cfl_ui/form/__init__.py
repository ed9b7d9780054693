"""The form: settings widgets and their state, the URL, presets, whether the form may run, and who runs it.

    controls        every declared setting as a control field, and the values the controls hold
    panel           the sidebar's widget groups, with a slot for each message
    presets, preset_picker   named starting points, and their selector
    url_codec, url_sync      the config as query parameters; a link into the controls and back, the one link builder
    verdicts        whether the form may run: validation, data set and device checks, the note under Run
    job_specs       what each training page submits;  page_choices: each training page's own choices
    controller      a page's job and its Run / Pause / Step / Stop
    frame           the one training-page frame (Playground, Compare, IFCA initialisation)
    session         the manager per process, the owner per browser, the runs it may see
    sweep_form      the Sweeps page's start form as a sweep spec
"""
