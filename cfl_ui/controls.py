"""Sidebar controls for an ExperimentConfig, validated by the core, synchronised with the URL.

Every control's value lives in st.session_state under `<prefix>.<field>`;
the configuration is rebuilt from those values on each run and validated with
`ExperimentConfig.validate()`. The first problem is shown by the control it
names (its ConfigError parameter) and the page keeps Run disabled.
"""
from __future__ import annotations

import dataclasses
import json
import math
import typing
from dataclasses import dataclass, field

import streamlit as st

from . import params as qp
from .presets import DEFAULT_PRESET, PRESETS, preset_config
from .session import set_shared_config, shared_config

# -- what the controls are -----------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """How a declared setting shows as a widget (everything but `kind` comes from the declaration)."""

    name: str
    label: str
    kind: str  # int | float | optint | select | bool | json
    help: str = ""
    step: float | None = None
    fmt: str | None = None


def _widget_kind(s) -> str:
    if s.choices is not None:
        return "select"
    if s.kind is bool:
        return "bool"
    if s.kind is int:
        return "optint" if s.optional else "int"
    if s.kind is float:
        return "float"
    return "json" if s.kind is dict else "text"


def settings() -> dict:
    """The experiment's declared settings (cfl_core.settings), in declaration order."""
    from cfl_core.config import ExperimentConfig
    from cfl_core.settings import settings_of

    return settings_of(ExperimentConfig)


def _help(s) -> str:
    return s.help[:1].upper() + s.help[1:] + "." if s.help else ""


def _choices(name: str) -> list:
    s = settings()[name]
    return ([None] if s.optional else []) + list(s.choices)


FIELDS: dict[str, Field] = {
    s.name: Field(s.name, s.label, _widget_kind(s), _help(s), s.step, "%g" if s.kind is float else None)
    for s in settings().values() if s.flag or s.kind is dict
}
# the sidebar's sections: every declared setting of a group shows there (advanced ones under "More settings")
DATA_FIELDS = tuple(s.name for s in settings().values() if s.group == "data" and not s.advanced)
ADVANCED_DATA = tuple(s.name for s in settings().values() if s.group == "data" and s.advanced)
TRAIN_FIELDS = tuple(s.name for s in settings().values() if s.group == "training" and not s.advanced)
ADVANCED_TRAIN = tuple(s.name for s in settings().values() if s.group == "training" and s.advanced)
ADVANCED_DYNAMICS = tuple(s.name for s in settings().values() if s.group == "dynamics" and s.advanced)
# where a ConfigError's parameter is shown when it has no control of its own
PARAM_SLOT = {"test_samples_per_client": "test_samples_per_client", "algorithms": "algorithm", "config": "general"}


def key(prefix: str, name: str) -> str:
    return f"{prefix}.{name}"


def default_config() -> dict:
    return preset_config(DEFAULT_PRESET)


@st.cache_data(ttl=30, show_spinner=False)
def source_status() -> dict:
    from cfl_core.data import source_status as status

    return {s.name: s for s in status()}


def algorithm_label(name: str) -> str:
    from cfl_core.algorithms import ALGORITHMS

    cls = ALGORITHMS.get(name)
    return cls.label if cls else name


# -- state -----------------------------------------------------------------------------
def _coerce(f: Field, value, fallback):
    """The value as its control holds it (its setting's coercer), or the fallback when it cannot be."""
    from cfl_core.errors import ConfigError

    if f.kind == "json":
        return value if isinstance(value, str) else json.dumps(value or {}, separators=(",", ":"))
    s = settings()[f.name]
    try:
        v = s.coerce(value)
        s.check(v)
    except ConfigError:
        return fallback
    return v


def option_settings(algorithm: str) -> list:
    """The declared options (cfl_core.settings.Setting) of an algorithm, [] for an unknown one."""
    from cfl_core.algorithms import ALGORITHMS
    from cfl_core.settings import settings_of

    cls = ALGORITHMS.get(algorithm)
    return list(settings_of(cls.Options).values()) if cls is not None else []


def _option_fields(algorithm: str) -> list[tuple[str, typing.Any, typing.Any]]:
    """(name, type, default) of an algorithm's options."""
    return [(s.name, s.kind, s.default) for s in option_settings(algorithm)]


def apply_config(prefix: str, config: dict, *, notes: list | None = None) -> None:
    """Put a (partial) config into the controls' state; values a control cannot hold fall back to defaults."""
    defaults = default_config()
    merged = {**defaults, **{k: v for k, v in config.items() if k in defaults}}
    for name, f in FIELDS.items():
        value = merged.get(name)
        fallback = defaults.get(name)
        coerced = _coerce(f, value, fallback)
        # models=None (an algorithm without K-hat) is what the "models" switch below shows: no note
        empty_models = name == "models" and value is None
        if notes is not None and name in config and coerced != value and not (f.kind == "json") and not empty_models:
            notes.append(f"{name}={value!r} cannot be shown by its control; using {coerced!r}")
        st.session_state[key(prefix, name)] = coerced
    from cfl_core.algorithms import ALGORITHMS

    cls = ALGORITHMS.get(merged.get("algorithm"))
    uses = cls is not None and (cls.needs_models or cls.uses_init_mode)
    st.session_state[key(prefix, "models_on")] = merged.get("models") is not None and not uses
    if merged.get("models") is None:
        clusters = merged.get("clusters")
        st.session_state[key(prefix, "models")] = clusters if isinstance(clusters, int) else 4
    # algorithm options: reset to defaults, then the given ones

    given = merged.get("options") or {}
    for algo in ALGORITHMS:
        for name, hint, default in _option_fields(algo):
            value = given.get(name, default) if algo == merged.get("algorithm") else default
            st.session_state[key(prefix, f"opt.{algo}.{name}")] = value


def ensure_state(prefix: str) -> None:
    """Fill any missing control value (first visit, or after Streamlit dropped an unused widget's state)."""
    base = shared_config() or default_config()
    missing = {n: base.get(n) for n in FIELDS if key(prefix, n) not in st.session_state}
    if missing:
        current = {n: st.session_state.get(key(prefix, n), base.get(n)) for n in FIELDS}
        current["options"] = base.get("options") or {}
        apply_config(prefix, {**current, **missing})


def values(prefix: str) -> dict:
    """The config dict the controls describe now (not validated)."""
    from cfl_core.algorithms import ALGORITHMS

    out = {}
    for name, f in FIELDS.items():
        v = st.session_state.get(key(prefix, name))
        if f.kind == "json":
            try:
                v = json.loads(v or "{}")
            except json.JSONDecodeError:
                v = {"__invalid_json__": v}
        out[name] = v
    algo = out.get("algorithm")
    cls = ALGORITHMS.get(algo)
    if cls is not None and not (cls.needs_models or cls.uses_init_mode or st.session_state.get(key(prefix, "models_on"))):
        out["models"] = None
    options = {}
    for name, hint, default in _option_fields(algo):
        v = st.session_state.get(key(prefix, f"opt.{algo}.{name}"), default)
        if v != default:
            options[name] = v
    out["options"] = options
    return out


# -- URL -----------------------------------------------------------------------------------
def sync_from_url(prefix: str, load_run_config=None, page_default: dict | None = None) -> dict | None:
    """On a session's first visit to a page, or when a link with new query params arrives,
    put the URL's configuration into the controls. Returns the page keys found (run, vs, ...)
    when the URL was applied now, None otherwise."""
    current = st.query_params.to_dict()
    written = st.session_state.get(key(prefix, "_written"))
    first = not st.session_state.get(key(prefix, "_init"))
    extra = None
    notes: list[str] = []
    if current and current != written:
        config, extra, problems = qp.decode(current)
        notes += problems
        if not config and extra.get("run") and load_run_config is not None:
            config = load_run_config(extra["run"]) or {}
        if config:
            base = shared_config() or default_config()
            apply_config(prefix, {**base, **config}, notes=notes)
    elif first:
        base = page_default or shared_config()
        if base is None:
            apply_config(prefix, default_config())
            st.session_state[key(prefix, "preset")] = DEFAULT_PRESET
        else:
            apply_config(prefix, base)
        extra = {}
    st.session_state[key(prefix, "_init")] = True
    if extra is not None:
        st.session_state[key(prefix, "_notes")] = notes
    ensure_state(prefix)
    return extra


def url_notes(prefix: str) -> list[str]:
    """Problems found in the last link applied to this page (shown once)."""
    return st.session_state.pop(key(prefix, "_notes"), []) or []


def write_url(prefix: str, config: dict, extra: dict | None = None) -> dict:
    """Make the URL describe this page's state (only when it changed)."""
    params = qp.encode(config, extra)
    if st.query_params.to_dict() != params:
        st.query_params.from_dict(params)
    st.session_state[key(prefix, "_written")] = params
    return params


def share_link(params: dict) -> str:
    try:
        base = st.context.url or ""
    except Exception:
        base = ""
    return qp.link(base or "http://localhost:8501/", params)


def link_box(params: dict, note: str = "") -> None:
    """The sidebar's "Link to this page": the page's whole state as a URL, with a copy button."""
    with st.sidebar, st.expander("Link to this page", icon=":material/link:", expanded=False):
        if note:
            st.caption(note)
        st.code(share_link(params), language=None, wrap_lines=True)


# -- widgets ---------------------------------------------------------------------------------
@dataclass
class Panel:
    """Controls of one page; `slots` are the places where each field's message goes."""

    prefix: str
    slots: dict = field(default_factory=dict)

    def k(self, name: str) -> str:
        return key(self.prefix, name)

    def widget(self, name: str, where=None, *, disabled: bool = False, label: str | None = None,
               help: str | None = None, format_func=None):
        f = FIELDS[name]
        where = where or st.sidebar
        k = self.k(name)
        label = label or f.label
        help = help if help is not None else (f.help or None)
        if f.kind == "select":
            options = _choices(name)
            if st.session_state.get(k) not in options:
                st.session_state[k] = options[0]
            where.selectbox(label, options, key=k, help=help, disabled=disabled,
                            format_func=format_func or (lambda v: "default" if v is None else str(v)))
        elif f.kind == "int":
            where.number_input(label, key=k, step=1, format="%d", help=help, disabled=disabled)
        elif f.kind == "optint":
            where.number_input(label, key=k, step=1, format="%d", help=help, disabled=disabled,
                               placeholder="default")
        elif f.kind == "float":
            where.number_input(label, key=k, step=f.step or 0.1, format=f.fmt or "%g", help=help,
                               disabled=disabled)
        elif f.kind == "bool":
            where.checkbox(label, key=k, help=help, disabled=disabled)
        else:  # json, text
            where.text_input(label, key=k, help=help, disabled=disabled)
        self.slots[name] = where.empty()

    def pair(self, a: str, b: str, where=None, **kw) -> None:
        where = where or st.sidebar
        c1, c2 = where.columns(2)
        self.widget(a, c1, **kw.get(a, {}))
        self.widget(b, c2, **kw.get(b, {}))

    def pairs(self, names, where=None) -> None:
        """Widgets two to a row, in the order given (an odd last one alone)."""
        names = list(names)
        for i in range(0, len(names) - 1, 2):
            self.pair(names[i], names[i + 1], where)
        if len(names) % 2:
            self.widget(names[-1], where)

    def general_slot(self, where=None):
        self.slots["general"] = (where or st.sidebar).empty()

    # -- groups ----------------------------------------------------------------------------
    def data_controls(self, where=None) -> None:
        where = where or st.sidebar
        status = source_status()
        self.widget("dataset", where, format_func=lambda n: n if status.get(n) is None or status[n].available
                    else f"{n}  (not installed)",
                    help="Bundled data sets start at once; the others need their files (see the message).")
        from cfl_core.partition import PARTITION_HELP

        self.widget("partition", where, help=None)
        part = st.session_state.get(self.k("partition"))
        if part in PARTITION_HELP:
            where.caption(PARTITION_HELP[part])
        self.pairs([n for n in DATA_FIELDS if n not in ("dataset", "partition")], where)

    def algorithm_controls(self, where=None, *, pick_algorithm: bool = True, algorithms=None) -> None:
        from cfl_core.algorithms import ALGORITHMS

        where = where or st.sidebar
        if pick_algorithm:
            names = list(algorithms or ALGORITHMS)
            if st.session_state.get(self.k("algorithm")) not in names:
                st.session_state[self.k("algorithm")] = names[0]
            where.selectbox("Algorithm", names, key=self.k("algorithm"), format_func=algorithm_label,
                            help="Every algorithm of the registry; they share one engine.")
            self.slots["algorithm"] = where.empty()
            cls = ALGORITHMS.get(st.session_state.get(self.k("algorithm")))
            if cls is not None and cls.summary:
                where.caption(cls.summary)

    def model_controls(self, where=None, *, algorithms: list[str] | None = None) -> None:
        """K-hat and init mode, enabled when (one of) the algorithm(s) uses them."""
        from cfl_core.algorithms import ALGORITHMS

        where = where or st.sidebar
        names = algorithms or [st.session_state.get(self.k("algorithm"))]
        classes = [ALGORITHMS[n] for n in names if n in ALGORITHMS]
        uses_k = any(c.needs_models or c.uses_init_mode for c in classes)
        uses_init = any(c.uses_init_mode for c in classes)
        c1, c2 = where.columns(2)
        self.widget("models", c1, disabled=not uses_k,
                    help="How many models the algorithm keeps." if uses_k else
                    "Not used by this algorithm (it decides its own number of models).")
        self.widget("init", c2, disabled=not uses_init,
                    help=FIELDS["init"].help if uses_init else "This algorithm does not use the init modes.")

    def option_controls(self, algorithm: str, where=None) -> None:
        """The algorithm's own options, from its Options dataclass (nothing hard-coded)."""
        fields_ = _option_fields(algorithm)
        where = where or st.sidebar
        self.slots["options"] = where.empty()
        if not fields_:
            return
        with where.expander(f"{algorithm_label(algorithm)} options"):
            for s in option_settings(algorithm):
                k = self.k(f"opt.{algorithm}.{s.name}")
                if k not in st.session_state:
                    st.session_state[k] = s.default
                help_ = _help(s) + (f" Empty: {s.none_means}." if s.optional else "")
                if s.choices is not None:
                    choices = list(s.choices)
                    if st.session_state[k] not in choices:
                        st.session_state[k] = s.default if s.default in choices else choices[0]
                    st.selectbox(s.label, choices, key=k, help=help_)
                elif s.kind is bool:
                    st.checkbox(s.label, key=k, help=help_)
                elif s.kind is int:
                    st.number_input(s.label, key=k, step=1, format="%d", help=help_,
                                    placeholder=s.none_means if s.optional else None)
                elif s.kind is float:
                    st.number_input(s.label, key=k, step=s.step or 0.05, format="%g", help=help_,
                                    placeholder=s.none_means if s.optional else None)
                else:
                    st.text_input(s.label, key=k, help=help_)
            self.slots["options_inner"] = st.empty()

    def training_controls(self, where=None) -> None:
        self.pairs(TRAIN_FIELDS, where or st.sidebar)

    def advanced_controls(self, where=None, *, training: bool = True, dynamics: bool = True) -> None:
        where = where or st.sidebar
        with where.expander("More settings"):
            st.markdown("**Data inside a cluster**")
            for name in ADVANCED_DATA:
                self.widget(name, st)
            if training:
                st.markdown("**Training**")
                for name in ADVANCED_TRAIN:
                    self.widget(name, st)
            if dynamics:
                st.markdown("**Clients that change**")
                for name in ADVANCED_DYNAMICS:
                    self.widget(name, st)
            if training:
                self.widget_models_toggle()

    def widget_models_toggle(self) -> None:
        st.checkbox("Give K-hat to algorithms that do not need it", key=self.k("models_on"),
                    help="Some algorithms (e.g. CFL) find their own number of models; tick to pass K-hat anyway.")

    # -- messages ----------------------------------------------------------------------
    def show_error(self, error) -> None:
        """Put a ConfigError's message by the control it names."""
        param = getattr(error, "parameter", "general") or "general"
        name = PARAM_SLOT.get(param, param)
        if name.startswith("options."):
            name = "options_inner" if "options_inner" in self.slots else "options"
        slot = self.slots.get(name) or self.slots.get("general")
        if slot is not None:
            slot.error(str(error), icon=":material/warning:")

    def show_warning(self, name: str, text: str) -> None:
        slot = self.slots.get(name) or self.slots.get("general")
        if slot is not None:
            slot.warning(text, icon=":material/lock:")


# -- validation -------------------------------------------------------------------------------
@dataclass
class Verdict:
    configs: list  # validated ExperimentConfigs (empty when blocked)
    error: object | None = None  # the ConfigError shown by its control
    blocked: str | None = None  # why Run is disabled (one line), None when it may run
    estimate: object | None = None


def check_dataset(panel: Panel, config: dict) -> str | None:
    status = source_status().get(config.get("dataset"))
    if status is not None and not status.available:
        text = f"{status.name} is not installed here. {status.how_to_get}"
        panel.show_warning("dataset", text)
        return text
    return None


def check_device(panel: Panel, config: dict) -> str | None:
    if config.get("device") == "cuda":
        import torch

        if not torch.cuda.is_available():
            text = "device='cuda' is not allowed: no CUDA device is visible here; use auto or cpu"
            slot = panel.slots.get("device")
            if slot is not None:
                slot.error(text, icon=":material/warning:")
            return text
    return None


def validate(panel: Panel, build, *, parallel: bool = True) -> Verdict:
    """Run the page's `build()` (-> list of ExperimentConfig, raising ConfigError), show problems, estimate."""
    from cfl_core.errors import ConfigError

    from .estimate import estimate

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
        panel.slots.get("general", st.sidebar).error(str(err))
        return Verdict([], err, str(err))
    if blocked:
        return Verdict([], None, blocked)
    est = estimate(configs, parallel=parallel)
    if not est.ok:
        return Verdict([], None, est.message(), est)
    set_shared_config(configs[0].to_dict())
    return Verdict(configs, None, None, est)


# -- presets ------------------------------------------------------------------------------------
def preset_picker(panel: Panel, where=None, *, names: list[str] | None = None, on_apply=None) -> None:
    """The preset selector (first in the sidebar): choosing one fills every control."""
    where = where or st.sidebar
    names = names or list(PRESETS)
    k = panel.k("preset")
    options = ["—", *names]
    if st.session_state.get(k) not in options:
        st.session_state[k] = "—"

    def _apply():
        name = st.session_state.get(k)
        if name in PRESETS:
            apply_config(panel.prefix, preset_config(name))
            if on_apply is not None:
                on_apply(PRESETS[name])

    status = source_status()

    def _fmt(name):
        if name == "—":
            return "— choose a preset —"
        ds = PRESETS[name].config.get("dataset")
        s = status.get(ds)
        return name if s is None or s.available else f"{name}  (needs {ds})"

    where.selectbox("Preset", options, key=k, on_change=_apply, format_func=_fmt,
                    help="A preset fills every control below; change anything afterwards.")
    chosen = st.session_state.get(k)
    if chosen in PRESETS:
        modified = _differs(panel.prefix, preset_config(chosen))
        where.caption(PRESETS[chosen].blurb + ("  \n*(modified below)*" if modified else ""))


def _differs(prefix: str, config: dict) -> bool:
    now = values(prefix)
    return any(now.get(k) != v for k, v in config.items() if k in FIELDS and k not in ("options",)) or (
        (now.get("options") or {}) != (config.get("options") or {}))


def verdict_note(verdict, where) -> None:
    """Under the Run buttons: why Run is disabled, or the run's estimated cost."""
    if verdict.blocked:
        if verdict.error is None and verdict.estimate is not None:
            where.error(verdict.blocked, icon=":material/block:")
        else:
            where.caption(":material/warning: Run is disabled until the setting marked above is fixed.")
    elif verdict.estimate is not None:
        where.caption(f"Estimate: {verdict.estimate.describe()}.")
