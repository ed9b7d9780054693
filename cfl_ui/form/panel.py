"""The sidebar's widget panels: each page's controls drawn from the form's fields, in their groups, with a slot for
each message.

A `Panel` draws the controls of one page (data, algorithm, models, the
algorithm's own options, training, "More settings") from `controls.FIELDS`
and keeps, per field, the empty place under it where a ConfigError naming that
field is shown.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st

from ..charts.literal import md
from .controls import (ADVANCED_CONDITIONS, ADVANCED_DATA, ADVANCED_DYNAMICS, ADVANCED_TRAIN, DATA_FIELDS, FIELDS,
                       TRAIN_FIELDS,
                       algorithm_label, choices, help_text, key, option_key, option_settings, source_status)

# where a ConfigError's parameter is shown when it has no control of its own
PARAM_SLOT = {"test_samples_per_client": "test_samples_per_client", "algorithms": "algorithm", "config": "general"}


def section_key(prefix: str, section: str) -> str:
    """The state key of a sidebar expander drawn only while open (`Panel.lazy_expander`): True = open."""
    return key(prefix, f"_open_{section}")


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
            options = choices(name)
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

    def lazy_expander(self, where, label: str, section: str, keys: list[str], slot_names: list[str]):
        """An expander whose widgets are drawn only while it is open: the expander to draw into when open,
        else None.

        A closed expander's content is otherwise drawn anyway: the two sidebar expanders held 30 of the
        Playground's 53 widgets, about half a second of a fresh page in chromium here. Opening or closing it
        reruns the page. While closed, its values are kept: Streamlit drops the state of a widget that was not
        drawn, unless the value is written back, which is what happens below; a message about one of its
        fields goes right under the expander."""
        section_box = where.expander(label, key=section_key(self.prefix, section), on_change="rerun")
        if section_box.open:
            return section_box
        for k in keys:
            if k in st.session_state:
                st.session_state[k] = st.session_state[k]
        slot = where.empty()
        for name in slot_names:
            self.slots[name] = slot
        return None

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
        declared = option_settings(algorithm)
        where = where or st.sidebar
        self.slots["options"] = where.empty()
        if not declared:
            return
        keys = [option_key(self.prefix, algorithm, s.name) for s in declared]
        for k, s in zip(keys, declared):
            if k not in st.session_state:
                st.session_state[k] = s.default
        section = self.lazy_expander(where, f"{algorithm_label(algorithm)} options", f"options.{algorithm}", keys,
                                     ["options_inner"])
        if section is None:
            return
        with section:
            for s in declared:
                k = option_key(self.prefix, algorithm, s.name)
                help_ = help_text(s) + (f" Empty: {s.none_means}." if s.optional else "")
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

    def training_section(self, where=None) -> None:
        """The sidebar's closing part on the run pages: training, "More settings" and the general notes."""
        where = where or st.sidebar
        where.markdown("### Training")
        self.training_controls(where)
        self.advanced_controls(where)
        self.general_slot(where)

    def advanced_controls(self, where=None, *, training: bool = True, dynamics: bool = True,
                          conditions: bool = True) -> None:
        where = where or st.sidebar
        names = [*ADVANCED_DATA, *(ADVANCED_TRAIN if training else ()), *(ADVANCED_DYNAMICS if dynamics else ()),
                 *(ADVANCED_CONDITIONS if conditions else ())]
        keys = [self.k(n) for n in names] + ([self.k("models_on")] if training else [])
        section = self.lazy_expander(where, "More settings", "more", keys, names)
        if section is None:
            return
        with section:
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
            if conditions:
                # drop-outs, stragglers, privacy noise, attackers, unseen clients (cfl_core/conditions)
                st.markdown("**Conditions: drop-outs, privacy, attackers, unseen clients**")
                for name in ADVANCED_CONDITIONS:
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
            slot.error(md(error), icon=":material/warning:")  # the message echoes the value given: literally

    def show_warning(self, name: str, text: str) -> None:
        slot = self.slots.get(name) or self.slots.get("general")
        if slot is not None:
            slot.warning(text, icon=":material/lock:")
