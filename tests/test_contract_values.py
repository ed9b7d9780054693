"""The generated contract, values: every value a declaration refuses is refused with one line naming the field,
before any work, from the CLI, a config file, a sweep spec and a link alike.

The bad values are generated from each setting's own constraint (tests/contract_space.invalid_value: below
or above an Interval, on an open bound, NaN and infinities, a fraction for a whole number, a name outside
a Choice, the wrong type), for every experiment field, every option of every algorithm and every option
of every shift. `make test` runs contract_space.value_examples() examples per source, derandomised.
"""
from __future__ import annotations

import json

from hypothesis import given, note
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from cfl_core.algorithms import ALGORITHMS
from cfl_core.cli import main
from cfl_core.config import ExperimentConfig, load_config_file
from cfl_core.dynamics import SHIFTS
from cfl_core.errors import ConfigError
from cfl_core.sweep import SweepSpec
from cfl_ui.form import url_codec as params
from tests.contract_space import (experiment_settings, has_invalid, invalid_value, option_settings, shift_settings,
                                  value_examples)

EXAMPLES = hsettings(max_examples=value_examples())
FIELDS = [s for s in experiment_settings().values()]
OPTIONS = [(a, s) for a in sorted(ALGORITHMS) for s in option_settings(a).values()]
SHIFT_OPTIONS = [(name, s) for name in sorted(n for n in SHIFTS if SHIFTS[n] is not None)
                 for s in shift_settings(name).values()]


# the default algorithm (CLoVE) needs K-hat: every source gets a config that is valid but for the bad value
VALID = {"models": 4}


def bad_field(text: bool):
    """(setting, a value its declaration refuses)."""
    usable = [s for s in FIELDS if has_invalid(s, text=text) and (s.flag or not text)]
    return st.sampled_from(usable).flatmap(lambda s: st.tuples(st.just(s), invalid_value(s, text=text)))


def bad_option(pairs, text: bool):
    usable = [(owner, s) for owner, s in pairs if has_invalid(s, text=text)]
    return st.sampled_from(usable).flatmap(
        lambda p: st.tuples(st.just(p[0]), st.just(p[1]), invalid_value(p[1], text=text)))


def base_for(algorithm: str) -> dict:
    """The fields an algorithm needs beside the defaults (K-hat where it needs one)."""
    return {"algorithm": algorithm, **({"models": 2} if ALGORITHMS[algorithm].needs_models else {})}


def cli_refuses(capsys, tmp_path, argv: list[str], parameter: str) -> None:
    """The CLI answers one line naming `parameter`, exit code 2, and writes nothing."""
    out = tmp_path / "never"
    code = main([*argv, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    note(f"stderr: {err}")
    assert code == 2
    assert len(err) == 1 and err[0].startswith(f"error: {parameter}="), err
    assert not out.exists(), "nothing may be written for a refused value"


def refused(parameter: str, fn) -> ConfigError:
    try:
        fn()
    except ConfigError as exc:
        assert exc.parameter == parameter, f"the error names {exc.parameter!r}, not {parameter!r}: {exc}"
        assert "\n" not in str(exc) and len(str(exc)) < 2000
        return exc
    raise AssertionError(f"{parameter}: the bad value was accepted")


# -- experiment fields -----------------------------------------------------------------------------------------
@EXAMPLES
@given(bad=bad_field(text=False))
def test_a_config_file_refuses_every_generated_bad_field_value(bad, tmp_path):
    s, value = bad
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**VALID, s.name: value}))
    refused(s.name, lambda: load_config_file(str(path)).validate())


@EXAMPLES
@given(bad=bad_field(text=True))
def test_the_cli_refuses_every_generated_bad_flag_value(bad, tmp_path, capsys):
    s, text = bad
    valid = [f"--{k}={v}" for k, v in VALID.items() if k != s.name]
    cli_refuses(capsys, tmp_path, ["run", *valid, f"{s.flag_name}={text}"], s.name)


@EXAMPLES
@given(bad=bad_field(text=False), where=st.sampled_from(["base", "grid"]))
def test_a_sweep_spec_refuses_every_generated_bad_field_value(bad, where):
    s, value = bad
    other = "rounds" if s.name == "seed" else "seed"
    if where == "base":
        spec = {"base": {**VALID, s.name: value}, "grid": {other: [1, 2]}}
        parameter = f"base.{s.name}"
    else:
        spec = {"base": {k: v for k, v in VALID.items() if k != s.name},
                "grid": {s.name: [ExperimentConfig(**VALID).to_dict()[s.name], value]}}
        parameter = f"grid.{s.name}[1]"
    refused(parameter, lambda: SweepSpec.from_dict(spec))


@EXAMPLES
@given(bad=bad_field(text=True))
def test_a_link_drops_every_generated_bad_field_value_with_one_note(bad):
    s, text = bad
    config, _, problems = params.decode({s.name: text})
    assert s.name not in config
    assert len(problems) == 1 and problems[0].startswith(f"{s.name}=") and len(problems[0]) < 2000, problems


# -- algorithm options -----------------------------------------------------------------------------------------
@EXAMPLES
@given(bad=bad_option(OPTIONS, text=False))
def test_a_config_file_refuses_every_generated_bad_option(bad, tmp_path):
    algorithm, s, value = bad
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**base_for(algorithm), "options": {s.name: value}}))
    refused(f"options.{s.name}", lambda: load_config_file(str(path)).validate())


@EXAMPLES
@given(bad=bad_option(OPTIONS, text=True))
def test_the_cli_refuses_every_generated_bad_option(bad, tmp_path, capsys):
    algorithm, s, text = bad
    flags = [f"--{k}={v}" for k, v in base_for(algorithm).items()]
    cli_refuses(capsys, tmp_path, ["run", *flags, "--option", f"{s.name}={text}"], f"options.{s.name}")


@EXAMPLES
@given(bad=bad_option(OPTIONS, text=False), where=st.sampled_from(["options", "grid"]))
def test_a_sweep_spec_refuses_every_generated_bad_option(bad, where):
    algorithm, s, value = bad
    if where == "options":
        spec = {"base": base_for(algorithm), "options": {algorithm: {s.name: value}}, "grid": {"seed": [0, 1]}}
        parameter = f"options.{algorithm}.{s.name}"
    else:
        spec = {"base": base_for(algorithm), "grid": {f"options.{s.name}": [value]}}
        parameter = f"grid.options.{s.name}[0]"
    refused(parameter, lambda: SweepSpec.from_dict(spec))


@EXAMPLES
@given(bad=bad_option(OPTIONS, text=False))
def test_a_link_drops_every_generated_bad_option_with_one_note(bad):
    algorithm, s, value = bad
    config, _, problems = params.decode({"algorithm": algorithm, "options": json.dumps({s.name: value})})
    assert s.name not in config.get("options", {})
    assert len(problems) == 1 and problems[0].startswith(f"options.{s.name} in the link was ignored"), problems


# -- shift options ---------------------------------------------------------------------------------------------
@EXAMPLES
@given(bad=bad_option(SHIFT_OPTIONS, text=False))
def test_a_config_file_refuses_every_generated_bad_shift_option(bad, tmp_path):
    shift, s, value = bad
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**VALID, "shift": shift, "shift_options": {s.name: value}}))
    refused(f"shift_options.{s.name}", lambda: load_config_file(str(path)).validate())


@EXAMPLES
@given(bad=bad_option(SHIFT_OPTIONS, text=True))
def test_the_cli_refuses_every_generated_bad_shift_option(bad, tmp_path, capsys):
    shift, s, text = bad
    cli_refuses(capsys, tmp_path, ["run", "--models=4", f"--shift={shift}", "--shift-option", f"{s.name}={text}"],
                f"shift_options.{s.name}")


@EXAMPLES
@given(bad=bad_option(SHIFT_OPTIONS, text=False))
def test_a_sweep_spec_refuses_every_generated_bad_shift_option(bad):
    shift, s, value = bad
    spec = {"base": {**VALID, "shift": shift}, "grid": {f"shift_options.{s.name}": [value]}}
    refused(f"grid.shift_options.{s.name}[0]", lambda: SweepSpec.from_dict(spec))


@EXAMPLES
@given(bad=bad_option(SHIFT_OPTIONS, text=False))
def test_a_link_drops_every_generated_bad_shift_option_with_one_note(bad):
    shift, s, value = bad
    config, _, problems = params.decode({"shift": shift, "shift_options": json.dumps({s.name: value})})
    assert s.name not in config.get("shift_options", {})
    assert len(problems) == 1 and problems[0].startswith(f"shift_options.{s.name} in the link was ignored"), problems
