"""The configuration in the URL: every ExperimentConfig field as a query parameter.

    encode(config_dict, extra) -> {name: str}      what st.query_params is set to
    decode(query_params) -> (config_dict, extra, problems)

Values are plain strings (None -> "none", booleans -> true/false, dicts ->
compact JSON), so a link is readable and reproduces the same run: same seed,
same data, same initial models. Unknown or malformed values are reported in
`problems` (one line each) and left out; the page then shows the defaults.
"""
from __future__ import annotations

import dataclasses
import json
import types
import typing
from urllib.parse import urlencode

PAGE_KEYS = ("run", "vs", "algos", "algo_options", "seeds", "modes", "view")  # page state beside the config


def _field_types() -> dict[str, typing.Any]:
    from cfl_core.config import ExperimentConfig

    hints = typing.get_type_hints(ExperimentConfig)
    return {f.name: hints[f.name] for f in dataclasses.fields(ExperimentConfig)}


def _base(hint):
    """(the plain type, whether None is allowed) of a field's annotation."""
    optional = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(args) < len(typing.get_args(hint))
        hint = args[0]
    return (typing.get_origin(hint) or hint), optional


def encode_value(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def encode(config: dict, extra: dict | None = None) -> dict[str, str]:
    out = {name: encode_value(config[name]) for name in _field_types() if name in config}
    for key, value in (extra or {}).items():
        if value is None or value == "" or value == []:
            continue
        out[key] = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return out


def _decode_value(raw: str, hint):
    base, optional = _base(hint)
    text = raw.strip()
    if optional and text.lower() in ("none", "null", ""):
        return None
    if base is bool:
        if text.lower() in ("true", "1", "yes", "on"):
            return True
        if text.lower() in ("false", "0", "no", "off"):
            return False
        raise ValueError("true or false")
    if base is int:
        value = float(text)
        if not value.is_integer():
            raise ValueError("a whole number")
        return int(value)
    if base is float:
        return float(text)
    if base is dict:
        value = json.loads(text or "{}")
        if not isinstance(value, dict):
            raise ValueError("a JSON object")
        return value
    return text


def decode(params: typing.Mapping[str, typing.Any]) -> tuple[dict, dict, list[str]]:
    """(config fields found, page keys found, problems). Values may be str or list[str] (the last wins)."""
    types = _field_types()
    config, extra, problems = {}, {}, []
    for key, raw in params.items():
        if isinstance(raw, (list, tuple)):
            raw = raw[-1] if raw else ""
        raw = str(raw)
        if key in types:
            try:
                config[key] = _decode_value(raw, types[key])
            except (ValueError, json.JSONDecodeError) as exc:
                problems.append(f"{key}={raw!r} in the link was ignored ({exc})")
        elif key in PAGE_KEYS:
            extra[key] = raw
        # anything else (utm tags, embed options) is not ours: leave it alone
    return config, extra, problems


def split_list(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def link(base_url: str, params: dict[str, str]) -> str:
    base = (base_url or "").split("?")[0].split("#")[0]
    return f"{base}?{urlencode(params)}" if params else base
