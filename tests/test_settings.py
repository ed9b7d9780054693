"""Settings declared once (cfl_core.settings): one coercer, constraints as data, and every place generated from them."""
from __future__ import annotations

import argparse
import dataclasses
import importlib
from dataclasses import dataclass

import pytest

from cfl_core.algorithms import ALGORITHMS
from cfl_core.config import CLIENT_FIELDS, ExperimentConfig
from cfl_core.dynamics import SHIFTS
from cfl_core.errors import ConfigError
from cfl_core.partition import PartitionConfig
from cfl_core.settings import Choice, Interval, check_values, parse, setting, settings_of


@dataclass(frozen=True)
class Toy:
    count: int = setting(3, Interval(1, 10), label="Count", help="how many")
    share: float | None = setting(None, Interval(0, 1, low_open=True), label="Share", help="a share")
    on: bool = setting(False, label="On", help="a switch")
    mode: str = setting("a", Choice(("a", "b")), label="Mode", help="which")
    extra: dict = setting({}, label="Extra", help="a JSON object")


def test_typed_values_are_never_read_from_strings():
    s = settings_of(Toy)
    with pytest.raises(ConfigError, match="on='false' is not allowed: true or false"):
        s["on"].coerce("false")  # a config file's "false" is not a boolean (it used to be truth-tested: true)
    with pytest.raises(ConfigError, match="count='3'"):
        s["count"].coerce("3")
    with pytest.raises(ConfigError, match="count=True"):
        s["count"].coerce(True)  # True is not the number 1
    assert s["count"].coerce(3.0) == 3 and isinstance(s["count"].coerce(3.0), int)
    assert s["share"].coerce(1) == 1.0 and isinstance(s["share"].coerce(1), float)
    assert s["share"].coerce(None) is None
    with pytest.raises(ConfigError, match="count=None"):
        s["count"].coerce(None)


def test_text_values_from_flags_and_links():
    s = settings_of(Toy)
    assert s["on"].coerce("TRUE", text=True) is True and s["on"].coerce("false", text=True) is False
    for bad in ("yes", "1", ""):
        with pytest.raises(ConfigError, match="true or false"):
            s["on"].coerce(bad, text=True)
    assert s["count"].coerce("1e1", text=True) == 10 and s["count"].coerce(" 4 ", text=True) == 4
    with pytest.raises(ConfigError, match="count='2.5'"):
        s["count"].coerce("2.5", text=True)
    assert s["share"].coerce("none", text=True) is None and s["share"].coerce("", text=True) is None
    assert s["extra"].coerce('{"a": 1}', text=True) == {"a": 1}
    with pytest.raises(ConfigError, match="a JSON object"):
        s["extra"].coerce("[1, 2]", text=True)
    with pytest.raises(ConfigError, match="a JSON object"):
        s["extra"].coerce("{not json", text=True)


def test_constraints_describe_what_is_allowed():
    s = settings_of(Toy)
    with pytest.raises(ConfigError, match=r"count=11 is not allowed: a whole number in \[1, 10\]"):
        s["count"].check(11)
    with pytest.raises(ConfigError, match=r"share=0.0 is not allowed: a number in \(0, 1\] \(or none\)"):
        s["share"].check(0.0)
    with pytest.raises(ConfigError, match="mode='c' is not allowed: one of a, b"):
        s["mode"].check("c")
    with pytest.raises(ConfigError, match="share=inf"):
        s["share"].check(float("inf"))
    s["share"].check(None)
    check_values(Toy())
    with pytest.raises(ConfigError, match="count=0"):
        check_values(Toy(count=0))


def test_parse_names_unknown_and_bad_values_with_the_prefix():
    assert parse(Toy, {"count": "5", "on": "true"}, text=True) == Toy(count=5, on=True)
    with pytest.raises(ConfigError, match=r"options.size=1 is not allowed: an option \(count, extra, mode, on, share\)"):
        parse(Toy, {"size": 1}, prefix="options.", what="an option")
    with pytest.raises(ConfigError, match="options.count=99"):
        parse(Toy, {"count": 99}, prefix="options.")
    with pytest.raises(ConfigError, match="options=.* not allowed: an object of name: value pairs"):
        parse(Toy, [1, 2], prefix="options.")


def test_config_from_dict_types_every_value():
    cfg = ExperimentConfig.from_dict({"rounds": 3.0, "lr": 1, "models": None})
    assert cfg.rounds == 3 and isinstance(cfg.rounds, int) and isinstance(cfg.lr, float)
    with pytest.raises(ConfigError, match="unsupervised='false'"):
        ExperimentConfig.from_dict({"unsupervised": "false"})
    with pytest.raises(ConfigError, match="options=\\[1, 2\\]"):
        ExperimentConfig.from_dict({"options": [1, 2]})
    with pytest.raises(ConfigError, match="config="):
        ExperimentConfig.from_dict([1])
    with pytest.raises(ConfigError, match="rounds='many'"):
        ExperimentConfig(rounds="many", models=4).validate()


def test_client_fields_are_the_partition_fields_and_define_data_key():
    assert CLIENT_FIELDS == tuple(f.name for f in dataclasses.fields(PartitionConfig))
    a = ExperimentConfig(models=4)
    assert a.data_key() == a.replace(algorithm="ifca", lr=0.5, rounds=3).data_key()
    for name in CLIENT_FIELDS:
        other = {"dataset": "synthetic-blobs", "partition": "iid", "within": "dirichlet"}.get(name)
        changed = a.replace(**{name: other if other is not None else (getattr(a, name) or 0) + 1})
        assert changed.data_key() != a.data_key(), name
    # ExperimentConfig's data fields are the very declarations of PartitionConfig
    for name in CLIENT_FIELDS:
        assert settings_of(ExperimentConfig)[name] == settings_of(PartitionConfig)[name]


# -- every declared setting: a CLI flag, a URL key and a widget, round-tripping ------------------------------
def _run_parser(config_cls=ExperimentConfig):
    from cfl_core.cli.flags import add_setting_flags

    parser = argparse.ArgumentParser()
    add_setting_flags(parser, settings_of(config_cls))
    return parser


def _allowed(s, value) -> bool:
    from cfl_core.errors import ConfigError

    try:
        s.check(value)
    except ConfigError:
        return False
    return True


def _example(s):
    """A non-default allowed value of a setting."""
    if s.choices is not None:
        return next((v for v in s.choices if v != s.default), s.default)
    if s.kind is bool:
        return not s.default
    if s.kind is int:
        low = s.allowed.low if isinstance(s.allowed, Interval) and s.allowed.low is not None else 0
        return max(low, (s.default or 0) + 1)
    if s.kind is float:  # 0.5 or 0.25, else the middle of a narrower interval (dp_delta: (0, 0.1])
        inside = [v for v in (0.5, 0.25) if v != s.default and _allowed(s, v)]
        return inside[0] if inside else (s.allowed.low + s.allowed.high) / 2
    if s.kind is dict:
        return {"a": 1}
    return "x"


@pytest.mark.parametrize("name", list(settings_of(ExperimentConfig)))
def test_every_setting_has_a_flag_a_url_key_and_a_widget_that_round_trip(name):
    from cfl_ui.form import controls, url_codec as params

    s = settings_of(ExperimentConfig)[name]
    value = _example(s)
    text = s.to_text(value)
    if s.flag:
        args = _run_parser().parse_args([s.flag_name, text])
        assert s.coerce(getattr(args, name), text=True) == value
    config, _, problems = params.decode(params.encode({name: value}))
    if name != "options":  # options are checked against the algorithm (test below)
        assert problems == [] and config == {name: value}
    assert name in controls.FIELDS
    placed = (controls.DATA_FIELDS + controls.ADVANCED_DATA + controls.TRAIN_FIELDS + controls.ADVANCED_TRAIN
              + controls.ADVANCED_DYNAMICS + controls.ADVANCED_CONDITIONS)
    assert name in placed or s.group == "algorithm", f"{name} has no place in the sidebar"


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_algorithm_option_round_trips_and_refuses_a_bad_value(algorithm):
    from cfl_ui.form import url_codec as params

    cls = ALGORITHMS[algorithm]
    for s in settings_of(cls.Options).values():
        value = _example(s)
        assert cls.parse_options({s.name: s.to_text(value)}, text=True) == cls.Options(**{s.name: value})
        kept, dropped = params.valid_options(algorithm, {s.name: value})
        assert kept == {s.name: value} and dropped == []
        bad = "not-a-value" if s.kind is not str or s.choices is not None else 12
        with pytest.raises(ConfigError, match=f"options.{s.name}="):
            cls.parse_options({s.name: bad})


@pytest.mark.parametrize("shift", [n for n in SHIFTS if n != "none"])
def test_every_shift_option_is_declared(shift):
    cls = SHIFTS[shift]
    for s in settings_of(cls.Options).values():
        assert s.label and s.help
        with pytest.raises(ConfigError, match=f"shift_options.{s.name}="):
            cls.parse({s.name: {"not": "a value"}})


def test_a_setting_declared_only_once_gets_a_flag_a_url_key_and_a_widget(monkeypatch):
    """The README's promise: adding a setting is one line in one file; the rest appears by itself."""
    import cfl_core.cli.run_cmd as run_cmd
    import cfl_core.config as config_module
    from cfl_ui.form import controls, url_codec as params

    @dataclass(frozen=True)
    class Extended(ExperimentConfig):
        warmup_pause: int = setting(3, Interval(0), label="Warm-up pause", help="rounds to wait", group="training")

    monkeypatch.setattr(config_module, "ExperimentConfig", Extended)
    monkeypatch.setattr(run_cmd, "ExperimentConfig", Extended)
    try:
        importlib.reload(controls)
        parser = argparse.ArgumentParser()
        run_cmd.add_experiment_flags(parser)
        args = parser.parse_args(["--warmup-pause", "7", "--models", "4"])
        assert run_cmd.config_from_args(args, validate=False).warmup_pause == 7
        with pytest.raises(ConfigError, match="warmup_pause=-1"):
            run_cmd.config_from_args(parser.parse_args(["--warmup-pause", "-1", "--models", "4"]))
        assert params.encode({"warmup_pause": 7}) == {"warmup_pause": "7"}
        assert params.decode({"warmup_pause": "7"})[0] == {"warmup_pause": 7}
        assert "warmup_pause=" in params.decode({"warmup_pause": "x"})[2][0]
        assert controls.FIELDS["warmup_pause"].label == "Warm-up pause"
        assert controls.FIELDS["warmup_pause"].kind == "int" and "warmup_pause" in controls.TRAIN_FIELDS
    finally:
        monkeypatch.undo()
        importlib.reload(controls)
    assert "warmup_pause" not in controls.FIELDS


def test_a_link_with_wrongly_typed_options_keeps_the_good_ones():
    from cfl_ui.form import url_codec as params

    config, _, problems = params.decode({"algorithm": "clove",
                                         "options": '{"stable_rounds":"abc","sqrt_losses":"yes","k":[1],'
                                                    '"stable_share":0.5}'})
    assert config["options"] == {"stable_share": 0.5}
    assert len(problems) == 3 and all("in the link was ignored" in p for p in problems)
