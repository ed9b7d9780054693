"""The configuration in the URL: every ExperimentConfig field as a query parameter.

    encode(config_dict, extra) -> {name: str}      what st.query_params is set to
    decode(query_params) -> (config_dict, extra, problems)

Values are plain strings written and read by each setting's declaration
(cfl_core.settings: None -> "none", booleans -> true/false, dicts -> compact
JSON), so a link is readable and reproduces the same run: same seed, same data,
same initial models. Unknown or malformed values are reported in `problems`
(one line each) and left out; the page then shows the defaults.
"""
from __future__ import annotations

import typing
from urllib.parse import urlencode

PAGE_KEYS = ("run", "vs", "algos", "algo_options", "seeds", "modes", "view")  # page state beside the config


def _settings():
    from cfl_core.config import ExperimentConfig
    from cfl_core.settings import settings_of

    return settings_of(ExperimentConfig)


def encode(config: dict, extra: dict | None = None) -> dict[str, str]:
    out = {name: s.to_text(config[name]) for name, s in _settings().items() if name in config}
    for key, value in (extra or {}).items():
        if value is None or value == "" or value == []:
            continue
        out[key] = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return out


def decode(params: typing.Mapping[str, typing.Any]) -> tuple[dict, dict, list[str]]:
    """(config fields found, page keys found, problems). Values may be str or list[str] (the last wins).

    Every value goes through its setting's coercer and allowed values; the algorithm's options through
    the algorithm's declared options (each bad one is left out with the reason)."""
    from cfl_core.errors import ConfigError, shown

    declared = _settings()
    config, extra, problems = {}, {}, []
    for key, raw in params.items():
        if isinstance(raw, (list, tuple)):
            raw = raw[-1] if raw else ""
        raw = str(raw)
        if key in declared:
            try:
                value = declared[key].coerce(raw, text=True)
                declared[key].check(value)
                config[key] = value
            except ConfigError as exc:
                problems.append(f"{key}={shown(raw)} in the link was ignored ({exc.allowed})")
        elif key in PAGE_KEYS:
            extra[key] = raw
        # anything else (utm tags, embed options) is not ours: leave it alone
    if config.get("options"):
        config["options"], dropped = valid_options(config.get("algorithm"), config["options"])
        problems += [f"options.{name} in the link was ignored ({why})" for name, why in dropped]
    if config.get("shift_options"):
        config["shift_options"], dropped = valid_shift_options(config.get("shift"), config["shift_options"])
        problems += [f"shift_options.{name} in the link was ignored ({why})" for name, why in dropped]
    return config, extra, problems


def _each_checked(parse, options: dict) -> tuple[dict, list[tuple[str, str]]]:
    """Every option typed and checked alone by `parse` ({name: value} -> options object); (kept, dropped)."""
    from cfl_core.errors import ConfigError

    kept, dropped = {}, []
    for name, value in options.items():
        try:
            kept[name] = getattr(parse({name: value}), name)
        except ConfigError as exc:
            dropped.append((name, exc.allowed))
    return kept, dropped


def valid_shift_options(shift: str | None, options: dict) -> tuple[dict, list[tuple[str, str]]]:
    """The options a shift declares, each typed and checked alone; (kept, [(name, why) dropped])."""
    from cfl_core.dynamics import SHIFTS

    cls = SHIFTS.get(shift or "none")
    if cls is None:
        return options, []  # no shift (or none in the link): the options wait for one, as the controls keep them
    return _each_checked(cls.parse, options)


def valid_options(algorithm: str | None, options: dict) -> tuple[dict, list[tuple[str, str]]]:
    """The options an algorithm declares, each typed and checked alone; (kept, [(name, why) dropped])."""
    from cfl_core.algorithms import ALGORITHMS

    cls = ALGORITHMS.get(algorithm or "clove")
    if cls is None:
        return {}, [(name, f"no algorithm {algorithm!r}") for name in options]
    return _each_checked(cls.parse_options, options)


def split_list(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def link(base_url: str, params: dict[str, str]) -> str:
    base = (base_url or "").split("?")[0].split("#")[0]
    return f"{base}?{urlencode(params)}" if params else base
