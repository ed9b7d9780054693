"""Sweep specs: validation through the declared settings, expansion, stable keys, the point limit, tables."""
import json
from pathlib import Path

import pytest

from cfl_core.cli import main
from cfl_core.config import ExperimentConfig
from cfl_core.errors import ConfigError
from cfl_core.sweep import InvalidPoints, SweepSpec, plan, point_key, run_sweep
from cfl_core.sweep.tables import grid_cells, mean_std, summary_table

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted((ROOT / "sweeps").glob("*.yaml"))


def _error(data) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        SweepSpec.from_dict(data).expand()
    return info.value


# -- errors name the field and what is allowed -------------------------------------------------------------
def test_a_bad_grid_value_names_its_place_and_the_allowed_values():
    err = _error({"grid": {"partition": ["feature-skew", "label-skew-9"]}})
    assert err.parameter == "grid.partition[1]" and err.value == "label-skew-9"
    assert "feature-skew" in err.allowed and "concept-shift" in err.allowed


def test_base_values_go_through_their_settings():
    err = _error({"base": {"rounds": 0}, "grid": {"seed": [0]}})
    assert err.parameter == "base.rounds" and "a whole number in [1," in err.allowed
    err = _error({"base": {"unsupervised": "false"}, "grid": {"seed": [0]}})  # a string is never a boolean
    assert err.parameter == "base.unsupervised" and "true or false" in err.allowed


def test_an_unknown_field_is_refused_with_the_declared_fields():
    err = _error({"grid": {"roundz": [1, 2]}})
    assert err.parameter == "grid.roundz[0]" and "rounds" in err.allowed and "partition" in err.allowed
    err = _error({"gird": {"rounds": [1]}})
    assert err.parameter == "gird" and "grid" in err.allowed


def test_per_algorithm_options_are_validated_by_the_algorithms_options():
    err = _error({"grid": {"algorithm": ["clove", "ifca"]}, "options": {"clove": {"stable_roundz": 3}}})
    assert err.parameter == "options.clove.stable_roundz" and "stable_rounds" in err.allowed
    err = _error({"grid": {"seed": [0]}, "options": {"clove": {"stable_rounds": 0}}})
    assert err.parameter == "options.clove.stable_rounds" and ">= 1" in err.allowed
    err = _error({"grid": {"seed": [0]}, "options": {"klove": {}}})
    assert err.parameter == "options.klove" and "clove" in err.allowed
    err = _error({"grid": {"algorithm": ["ifca", "fedavg"], "options.stable_rounds": [1, 2]}})
    assert err.parameter == "grid.options.stable_rounds[0]" and "an option of the sweep's algorithms" in err.allowed


def test_zip_groups_need_lists_of_one_length_and_a_field_is_swept_once():
    err = _error({"zip": [{"partition": ["feature-skew", "iid"], "clusters": [4]}]})
    assert err.parameter == "zip[0].clusters" and "2 values" in err.allowed
    err = _error({"grid": {"clusters": [4, 5]}, "zip": [{"partition": ["feature-skew", "iid"], "clusters": [4, 5]}]})
    assert err.parameter == "zip[0]" and "grid.clusters" in err.allowed
    err = _error({"grid": {"seed": [0, 0]}})
    assert err.parameter == "grid.seed" and "without repeats" in err.allowed
    err = _error({"base": {"rounds": 3}})
    assert err.parameter == "grid" and "at least one swept field" in err.allowed


def test_a_folder_template_must_name_fields_and_give_each_point_its_own_folder():
    err = _error({"grid": {"seed": [0, 1]}, "folder": "{sede}"})
    assert err.parameter == "folder" and "placeholders" in err.allowed
    err = _error({"grid": {"seed": [0, 1], "algorithm": ["clove", "ifca"]}, "folder": "seed{seed}"})
    assert err.parameter == "folder" and "both get 'seed0'" in err.allowed


def test_yaml_and_json_files_read_alike_and_syntax_errors_say_where(tmp_path):
    (tmp_path / "a.yaml").write_text("base: {rounds: 2}\ngrid:\n  seed: [0, 1]\n")
    (tmp_path / "b.json").write_text(json.dumps({"base": {"rounds": 2}, "grid": {"seed": [0, 1]}}))
    a, b = SweepSpec.from_file(tmp_path / "a.yaml"), SweepSpec.from_file(tmp_path / "b.json")
    assert a.name == "a" and b.name == "b"
    assert [p.key for p in a.expand().points] == [p.key for p in b.expand().points]
    (tmp_path / "c.yaml").write_text("grid: {seed: [0, 1]\n")
    with pytest.raises(ConfigError, match="valid YAML") as info:
        SweepSpec.from_file(tmp_path / "c.yaml")
    assert info.value.parameter == "spec"


def test_the_cli_prints_the_field_and_no_traceback(tmp_path, capsys):
    spec = tmp_path / "bad.json"
    spec.write_text(json.dumps({"grid": {"algorithm": ["clove", "klove"]}}))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "grid.algorithm[1]='klove' is not allowed: one of clove" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


# -- expansion ------------------------------------------------------------------------------------------------
def test_grid_zip_and_cases_expand_in_order_with_per_algorithm_options():
    spec = SweepSpec.from_dict({
        "base": {"rounds": 2, "options": {"stable_rounds": 2}},  # reaches the algorithms that declare it
        "grid": {"seed": [0, 1]},
        "zip": [{"partition": ["feature-skew", "label-skew-1"], "clusters": [4, 5], "samples_per_client": [60, 50]}],
        "cases": [{"algorithm": "clove"}, {"algorithm": "ifca"}, {"algorithm": "clove", "options": {"sqrt_losses": True}}],
        "options": {"clove": {"first_assignment": "evaluation"}},
    })
    points = spec.expand().points
    assert len(points) == 2 * 2 * 3
    assert [(p.config.seed, p.config.partition, p.config.algorithm) for p in points[:4]] == [
        (0, "feature-skew", "clove"), (0, "feature-skew", "ifca"), (0, "feature-skew", "clove"),
        (0, "label-skew-1", "clove")]
    assert points[3].config.clusters == 5 and points[3].config.samples_per_client == 50
    assert points[0].config.options == {"stable_rounds": 2, "first_assignment": "evaluation"}
    assert points[1].config.options == {}  # IFCA declares neither option
    assert points[2].config.options["sqrt_losses"] is True
    assert all(p.config.models == p.config.clusters for p in points)  # K-hat = true clusters, as in compare
    assert len({p.key for p in points}) == len(points) and len({p.folder for p in points}) == len(points)


def test_invalid_combinations_are_listed_per_point_before_anything_runs(tmp_path):
    spec = SweepSpec.from_dict({"base": {"rounds": 1, "clusters": 5},
                                "grid": {"partition": ["feature-skew", "label-skew-1"], "samples_per_client": [50, 60]}})
    expansion = spec.expand()
    assert len(expansion.points) == 2 and len(expansion.invalid) == 2
    assert {p.values["samples_per_client"] for p in expansion.invalid} == {60}
    report = expansion.report()
    assert "2 of 4 points are valid" in report
    assert "point 1 (partition=feature-skew, samples_per_client=60): samples_per_client=60 is not allowed: at most 53" in report
    assert "point 3 (partition=label-skew-1, samples_per_client=60)" in report
    out = tmp_path / "never"
    with pytest.raises(InvalidPoints) as info:
        run_sweep(spec, out, executor="serial")
    assert "2 of 4 points are valid" in str(info.value) and "--skip-invalid" in str(info.value)
    assert not out.exists()  # refused before anything ran or was written


def test_the_point_limit_refuses_with_the_count_and_the_limit(tmp_path, capsys):
    data = {"grid": {"algorithm": ["clove", "ifca"], "seed": list(range(12))}}
    with pytest.raises(ConfigError) as info:
        SweepSpec.from_dict(data).expand(max_points=10)
    assert info.value.parameter == "max_points" and "24 combinations, over the limit of 10" in info.value.allowed
    assert len(SweepSpec.from_dict(data).expand(max_points=24).points) == 24
    spec = tmp_path / "big.json"
    spec.write_text(json.dumps(data))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--max-points", "10"]) == 2
    assert "over the limit of 10 (raise it with --max-points)" in capsys.readouterr().err
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--max-points", "24", "--dry-run"]) == 0
    assert "24 of 24 points are valid" in capsys.readouterr().out and not (tmp_path / "o").exists()


# -- keys -------------------------------------------------------------------------------------------------------
def test_the_key_is_a_hash_of_the_full_config_with_defaults_filled_in():
    cfg = ExperimentConfig(algorithm="clove", models=4)
    assert point_key(cfg) == point_key(ExperimentConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))))
    assert point_key(cfg) == point_key(cfg.replace(options={"stable_rounds": 3}))  # 3 is the default
    assert point_key(cfg) != point_key(cfg.replace(options={"stable_rounds": 2}))
    assert point_key(cfg) != point_key(cfg.replace(rounds=21))
    assert point_key(cfg) != point_key(cfg.replace(seed=1))
    assert len(point_key(cfg)) == 16 and int(point_key(cfg), 16) >= 0
    # the same run in two different sweeps has the same key
    a = SweepSpec.from_dict({"base": {"rounds": 5}, "grid": {"seed": [0, 1]}}).expand().points
    b = SweepSpec.from_dict({"grid": {"rounds": [5, 6]}, "base": {"seed": 1}}).expand().points
    assert a[1].key == b[0].key


def test_identical_combinations_are_one_point():
    expansion = SweepSpec.from_dict({"grid": {"algorithm": ["clove", "fedavg"], "options.stable_rounds": [2, 3]}}).expand()
    assert [p.config.algorithm for p in expansion.points] == ["clove", "clove", "fedavg"]
    assert expansion.duplicates == 1 and expansion.points[2].values["options.stable_rounds"] is None


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_every_committed_spec_is_valid(path, tmp_path):
    expansion, states = plan(SweepSpec.from_file(path), tmp_path / path.stem)
    assert expansion.points and not expansion.invalid
    assert set(states.values()) == {"missing"}


# -- tables ------------------------------------------------------------------------------------------------------
def test_mean_std_formats_and_skips_missing_values():
    assert mean_std([0.5, 0.7], 100) == "60.00 ± 14.14"
    assert mean_std([None, 0.25], 1, digits=3) == "0.250"
    assert mean_std([None], 1) == "-"


def test_the_summary_has_a_row_per_cell_over_seeds():
    spec = SweepSpec.from_dict({"grid": {"partition": ["feature-skew", "iid"], "algorithm": ["oracle", "fedavg"],
                                         "seed": [0, 1]}})
    points = spec.expand().points
    summaries, statuses = {}, {}
    for i, p in enumerate(points):
        oracle = p.config.algorithm == "oracle"
        summaries[p.key] = {"final_accuracy": 0.9 if oracle else 0.5 + 0.1 * p.config.seed, "final_loss": 0.25,
                            "final_ari": 1.0 if oracle else 0.0, "first_round_ari_0_9": 0 if oracle else None}
        statuses[p.key] = "finished"
    statuses[points[-1].key] = "failed"
    table, notes = summary_table(spec.swept, points, summaries, statuses)
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    assert [r[:2] for r in rows] == [["| feature-skew", "oracle"], ["| feature-skew", "fedavg"], ["| iid", "oracle"],
                                     ["| iid", "fedavg"]]
    assert rows[0][2:] == ["90.00 ± 0.00", "0.2500 ± 0.0000", "1.00 ± 0.00", "2/2", "0 (2/2 reach it) |"]
    assert rows[1][2] == "55.00 ± 7.07" and rows[1][5:] == ["0/2", "never |"]
    assert rows[3][2] == "50.00" and rows[3][5] == "0/1"  # the failed seed is left out ...
    assert notes == ["iid, fedavg: 1 of 2 runs not finished (failed)"]  # ... and said so


def test_a_cell_without_any_ari_is_not_applicable_in_the_summary_and_the_grid():
    spec = SweepSpec.from_dict({"grid": {"algorithm": ["fedpac", "fedavg"], "seed": [0, 1]}})
    points = spec.expand().points
    summaries = {p.key: {"final_accuracy": 0.8, "final_loss": 0.5, "first_round_ari_0_9": None,
                         "final_ari": None if p.config.algorithm == "fedpac" else 0.0} for p in points}
    table, _ = summary_table(spec.swept, points, summaries, {p.key: "finished" for p in points})
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    assert rows[0][1] == "fedpac" and rows[0][4:] == ["n/a", "n/a", "n/a |"]
    assert rows[1][1] == "fedavg" and rows[1][4:] == ["0.00 ± 0.00", "0/2", "never |"]
    csv_rows = [{"algorithm": p.config.algorithm, "status": "finished", "folder": p.folder,
                 "final_ari": summaries[p.key]["final_ari"], "final_accuracy": 0.8, "first_round_ari_0_9": None}
                for p in points]
    grid = {c["algorithm"]: c for c in grid_cells(csv_rows, ["algorithm"])}
    assert grid["fedpac"]["success"] is None and grid["fedpac"]["final_ari"] is None
    assert grid["fedavg"]["success"] == 0.0
