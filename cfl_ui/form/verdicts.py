"""Whether the form may run: the page's configs validated by the core, data set and device checked, the cost estimated.

`validate` shows each problem by the control it names and returns a Verdict;
`verdict_note` says under the Run buttons why Run is disabled or what the run
will cost.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import streamlit as st

from ..charts.literal import md
from .controls import source_status, values
from .panel import Panel
from .session import set_shared_config


@dataclass
class Verdict:
    configs: list  # validated ExperimentConfigs (empty when blocked)
    error: object | None = None  # the ConfigError shown by its control
    blocked: str | None = None  # why Run is disabled (one line), None when it may run
    estimate: object | None = None
    adjusted: int | None = None  # Partitions: the samples_per_client drawn instead of one that does not fit


def check_dataset(panel: Panel, config: dict) -> str | None:
    status = source_status().get(config.get("dataset"))
    if status is not None and not status.available:
        text = f"{status.name} is not installed here. {status.how_to_get}"
        panel.show_warning("dataset", text)
        return text
    return None


def check_device(panel: Panel, config: dict) -> str | None:
    """The core's device check (`cuda` without a GPU is refused), its message by the device control."""
    from cfl_core.engine.federation import resolve_device
    from cfl_core.errors import ConfigError

    try:
        resolve_device(config.get("device") or "auto")
    except ConfigError as err:
        slot = panel.slots.get("device")
        if slot is not None:
            slot.error(md(err), icon=":material/warning:")
        return str(err)
    return None


def validate(panel: Panel, build, *, parallel: bool = True) -> Verdict:
    """Run the page's `build()` (-> list of ExperimentConfig, raising ConfigError), show problems, estimate."""
    from cfl_core.errors import ConfigError

    from ..jobs.estimate import estimate

    current = values(panel.prefix)
    blocked = check_dataset(panel, current) or check_device(panel, current)
    if "__invalid_json__" in (current.get("shift_options") or {}):
        err = ConfigError("shift_options", current["shift_options"]["__invalid_json__"], "a JSON object, e.g. {}")
        panel.show_error(err)
        return Verdict([], err, str(err))
    try:
        configs = build(current)
    except ConfigError as err:
        panel.show_error(err)
        return Verdict([], err, str(err))
    except (TypeError, ValueError) as err:  # a value no control should produce; still say so
        panel.slots.get("general", st.sidebar).error(md(err))
        return Verdict([], err, str(err))
    if blocked:
        return Verdict([], None, blocked)
    est = estimate(configs, parallel=parallel)
    if not est.ok:
        return Verdict([], None, est.message(), est)
    set_shared_config(configs[0].to_dict())
    return Verdict(configs, None, None, est)


def validate_partition(panel: Panel, config: dict) -> Verdict:
    """The Partitions page's check: the data set is installed and the partition alone can be built."""
    from cfl_core.data import dataset_info
    from cfl_core.errors import ConfigError

    from ..charts.partition_facts import partition_config

    blocked = check_dataset(panel, config)
    if blocked:
        return Verdict([], None, blocked)
    try:
        pcfg = partition_config(config)
        info = dataset_info(pcfg.dataset)
        pcfg.validate(info)
    except ConfigError as err:
        panel.show_error(err)
        fitted = largest_fitting_samples(pcfg, info) if err.parameter == "samples_per_client" else None
        if fitted is not None:  # too many samples per client for this structure: draw the largest that fits
            return Verdict([replace(pcfg, samples_per_client=fitted)], err, None, adjusted=fitted)
        return Verdict([], err, str(err))
    except (TypeError, ValueError) as err:  # a value no control should produce; still say so
        panel.general_slot(st.sidebar)
        panel.slots["general"].error(md(err))
        return Verdict([], err, str(err))
    return Verdict([pcfg])


def largest_fitting_samples(pcfg, info) -> int | None:
    """The largest samples_per_client below the requested one with which the partition can be built, or None.

    The default 60 does not fit every structure on the small bundled pools (label skews hand each cluster a few
    classes, which run out first): the Partitions page then shows the partition at this value instead of nothing."""
    from cfl_core.errors import ConfigError

    def fits(n: int) -> bool:
        try:
            replace(pcfg, samples_per_client=n).validate(info)
            return True
        except ConfigError:
            return False

    lo, hi = 0, int(pcfg.samples_per_client) - 1  # the demand grows with the size: bisect
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo if lo >= 1 and fits(lo) else None


def verdict_note(verdict: Verdict, where) -> None:
    """Under the Run buttons: why Run is disabled, or the run's estimated cost."""
    if verdict.blocked:
        if verdict.error is None and verdict.estimate is not None:
            where.error(md(verdict.blocked), icon=":material/block:")
        else:
            where.caption(":material/warning: Run is disabled until the setting marked in the sidebar is fixed.")
    elif verdict.estimate is not None:
        where.caption(f"Estimate: {verdict.estimate.describe()}.")


def not_ready(blocked: str) -> None:
    """In place of "Ready… press Run" while Run is disabled: why, in the main area (presenter mode has no sidebar
    to read it in)."""
    st.warning(f"**Not ready:** {md(blocked)}  \nRun stays disabled until this is fixed (the setting is marked "
               "in the sidebar).", icon=":material/block:")
