"""The settings space as Hypothesis strategies, generated from the declarations (cfl_core/settings.py).

Nothing here lists values by hand: every experiment field, every algorithm's Options, every shift's
Options, the profiles and the protocols come from their declarations (`Choice`, `Interval`, the
registries). What this module adds is a *box* per size-like field (a few clients, 2-3 rounds), so
that a generated run takes a fraction of a second; the box is intersected with the declared range,
never widened beyond it.

- `valid_value(setting)`: a value the declaration allows.
- `invalid_value(setting, text=...)`: a value the declaration refuses (out of range, wrong type, an
  unknown choice), as scikit-learn's `generate_invalid_param_val` does for its constraints; with
  `text=True` the form a CLI flag or a URL parameter would carry.
- `experiment_configs(algorithm)`: whole configs for one algorithm, with options, shift options,
  newcomers, partial participation, init modes, protocols, a profile and unsupervised training drawn.

Hypothesis profiles: `contract` (the default: few examples, derandomised, run by `make test`) and
`fuzz` (`make fuzz`: many more, random), chosen by $CFL_CONTRACT_PROFILE.
"""
from __future__ import annotations

import math
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from cfl_core.algorithms import ALGORITHMS
from cfl_core.config import ExperimentConfig
from cfl_core.data.registry import DATA_SOURCES
from cfl_core.dynamics import SHIFTS
from cfl_core.profiles import PROFILES, apply_profile
from cfl_core.settings import Choice, Interval, Setting, settings_of

PROFILE_ENV = "CFL_CONTRACT_PROFILE"
_COMMON = dict(deadline=None, database=None, print_blob=True,
               suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow,
                                      HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
# `make test`: a fixed number of examples with a pinned seed (derandomised), so CI is deterministic.
RUN_EXAMPLES = 6  # valid runs per algorithm (each runs, stops, resumes and is compared)
VALUE_EXAMPLES = 100  # invalid values per source (CLI, config file, sweep spec, URL)
settings.register_profile("contract", max_examples=RUN_EXAMPLES, derandomize=True, **_COMMON)
settings.register_profile("fuzz", max_examples=int(os.environ.get("CFL_FUZZ_EXAMPLES", "60")), **_COMMON)
settings.load_profile(os.environ.get(PROFILE_ENV, "contract"))


def value_examples() -> int:
    """Examples of a value test under the active profile (values are cheap: 15x the runs' count)."""
    return max(VALUE_EXAMPLES, settings.default.max_examples * 15)


# -- the box: small sizes for runs (intersected with the declared range) -----------------------------
BOX: dict[str, tuple[float, float]] = {
    "clusters": (2, 3), "clients_per_cluster": (2, 4), "samples_per_client": (8, 30),
    "test_samples_per_client": (4, 12), "rounds": (2, 3), "local_epochs": (1, 2), "batch_size": (4, 32),
    "lr": (0.005, 0.2), "models": (1, 4), "seed": (0, 5), "test_machines_per_cluster": (0, 3),
    "quantity_skew": (0, 1), "alpha": (0.1, 5), "newcomer_share": (0, 0.5), "num_classes_per_partition": (1, 4),
    # options and shift options: unbounded ones get a span of 10 above their lower bound (see `_bounds`)
    "restart_attempts": (1, 5), "pretrain_epochs": (0, 2), "pairs": (1, 3),
    # the conditions (cfl_core/conditions): every one drawn for every algorithm, at sizes a small run can hold
    "dropout_rate": (0, 0.5), "straggler_work": (0.1, 1), "condition_seed": (0, 5), "dp_noise": (0, 2),
    "dp_clip": (0.1, 10), "dp_loss_noise": (0, 2), "dp_loss_clip": (0.5, 20), "dp_delta": (1e-6, 1e-3),
    "malicious_share": (0, 0.4), "attack_scale": (0.5, 5), "unseen_share": (0, 0.4), "unseen_every": (0, 3),
}
# Fields a run never draws: the device (cuda needs a GPU), and the dicts (drawn from their own declarations).
FIXED = {"device": "cpu"}
BUILT_IN = tuple(name for name, source in DATA_SOURCES.items() if not source.file_based)


def _bounds(s: Setting, box: tuple[float, float] | None) -> tuple[float, float]:
    """The range to draw from: the declared Interval within the box (or a span of 10 above an open bound)."""
    a = s.allowed if isinstance(s.allowed, Interval) else Interval()
    low = a.low if a.low is not None else (-10 if a.high is None else a.high - 10)
    high = a.high if a.high is not None else low + 10
    if box is not None:
        low, high = max(low, box[0]), min(high, box[1])
    if s.kind is int:
        low = math.ceil(low + (1 if a.low_open and low == a.low else 0))
        high = math.floor(high - (1 if a.high_open and high == a.high else 0))
    return low, high


def valid_value(s: Setting, box: tuple[float, float] | None = None) -> st.SearchStrategy:
    """A value `s` allows (None included when the setting is optional)."""
    box = box if box is not None else BOX.get(s.name)
    if isinstance(s.allowed, Choice):
        out = st.sampled_from(s.allowed.values)
    elif s.kind is bool:
        out = st.booleans()
    elif s.kind is int:
        low, high = _bounds(s, box)
        out = st.integers(int(low), int(high))
    elif s.kind is float:
        a = s.allowed if isinstance(s.allowed, Interval) else Interval()
        low, high = _bounds(s, box)
        out = st.floats(low, high, allow_nan=False, allow_infinity=False,
                        exclude_min=a.low_open and low == a.low, exclude_max=a.high_open and high == a.high)
    else:
        out = st.just(s.default)  # free text and dicts: their default (their own rules say what else)
    return (st.none() | out) if s.optional else out


def invalid_value(s: Setting, *, text: bool = False) -> st.SearchStrategy:
    """A value the declaration of `s` refuses: outside the Interval, not one of the Choice, the wrong type.

    `text=True`: as a CLI flag or URL parameter carries it (the text of the value)."""
    bad: list[st.SearchStrategy] = []
    a = s.allowed
    if isinstance(a, Interval) and s.kind in (int, float):
        step = 1 if s.kind is int else 1e-6
        if a.low is not None:
            below = st.floats(a.low - 1e6, a.low - step, allow_nan=False) if s.kind is float else \
                st.integers(int(a.low) - 10**6, math.ceil(a.low) - 1)
            bad.append(below)
            if a.low_open:
                bad.append(st.just(s.kind(a.low)))
        if a.high is not None:
            above = st.floats(a.high + step, a.high + 1e6, allow_nan=False) if s.kind is float else \
                st.integers(math.floor(a.high) + 1, int(a.high) + 10**6)
            bad.append(above)
            if a.high_open:
                bad.append(st.just(s.kind(a.high)))
        if s.kind is float:
            bad.append(st.sampled_from([math.nan, math.inf, -math.inf]))
    if s.kind is int:
        bad.append(st.floats(0.1, 0.9).map(lambda f: float(_bounds(s, None)[0]) + f))  # not a whole number
    if isinstance(a, Choice):
        values = [str(v) for v in a.values]
        bad.append(st.text("abcdefghij-", min_size=1, max_size=8).map(lambda t: "no-such-" + t)
                   .filter(lambda t: t not in values))
    if s.kind is bool:
        bad.append(st.sampled_from(["yes", "1", "on"] if text else ["true", 1, 0, "yes"]))
    if not text:
        # the wrong type in a typed source (a config file, a sweep spec): a list, an object, a bool for a number
        # (a text holding a list takes a flat list of numbers or names, so its wrong list nests one)
        wrong = [[[1], 2] if s.list_as_text else [1, 2]] + ([] if s.kind is dict else [{"a": 1}])
        if s.kind in (int, float):
            wrong += [True, "3"]
        if s.kind is str:
            wrong += [3, 2.5]
        if s.kind is dict:
            wrong += ["x", 3]
        bad.append(st.sampled_from(wrong))
        if not s.optional:
            bad.append(st.none())
    elif s.kind in (int, float):
        bad.append(st.sampled_from(["abc", "1,5", "[1]"]))
    elif s.kind is dict:
        bad.append(st.sampled_from(["[1, 2]", "{not json", "3"]))
    if text:
        # a typed bad value in its text form (numbers as the CLI would print them)
        bad = [b.map(lambda v: v if isinstance(v, str) else s.to_text(v)) for b in bad]
    return st.one_of(bad) if bad else st.nothing()


def has_invalid(s: Setting, *, text: bool = False) -> bool:
    """Whether the declaration refuses anything in that form (free text in a flag is always a text)."""
    if text and s.kind is str and not isinstance(s.allowed, Choice):
        return False
    return True


def experiment_settings() -> dict[str, Setting]:
    return settings_of(ExperimentConfig)


def option_settings(algorithm: str) -> dict[str, Setting]:
    return settings_of(ALGORITHMS[algorithm].Options)


def shift_settings(shift: str) -> dict[str, Setting]:
    cls = SHIFTS.get(shift)
    return settings_of(cls.Options) if cls is not None and cls.Options is not None else {}


def some_of(declared: dict[str, Setting]) -> st.SearchStrategy:
    """A dict holding a drawn value for some of the declared settings (the others keep their defaults)."""
    names = sorted(n for n, s in declared.items() if not (s.kind in (str, dict) and not isinstance(s.allowed, Choice)))
    if not names:
        return st.just({})
    return st.lists(st.sampled_from(names), unique=True, max_size=len(names)).flatmap(
        lambda chosen: st.fixed_dictionaries({n: valid_value(declared[n]) for n in chosen}))


@st.composite
def experiment_configs(draw, algorithm: str) -> tuple[ExperimentConfig, str | None]:
    """(a config of `algorithm` with every field drawn from its declaration, the profile applied or None).

    The config may be refused by `validate()` (a combination the rules forbid): the test says so and
    draws again."""
    declared = experiment_settings()
    values = {}
    for name, s in declared.items():
        if name in FIXED:
            values[name] = FIXED[name]
        elif name == "algorithm":
            values[name] = algorithm
        elif name == "dataset":
            values[name] = draw(st.sampled_from(BUILT_IN))
        elif s.kind is dict:
            continue
        else:
            values[name] = draw(valid_value(s))
    if ALGORITHMS[algorithm].needs_models and values["models"] is None:
        values["models"] = draw(st.integers(1, values["clusters"]))
    if values["newcomer_share"] > 0:
        values["newcomer_round"] = draw(st.integers(1, values["rounds"] - 1))
    else:
        values["newcomer_round"] = 0
    values["options"] = draw(some_of(option_settings(algorithm)))
    values["shift_options"] = draw(some_of(shift_settings(values["shift"])))
    config = ExperimentConfig(**values)
    profile = draw(st.none() | st.sampled_from(PROFILES))
    if profile is not None:
        # as `--profile` with the drawn sizes given: the profile sets the training rules, never the run length
        keep = {"rounds", "dataset", "device"}
        config, _ = apply_profile(config, profile, keep=keep)
    return config, profile
