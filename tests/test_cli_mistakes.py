"""Command-line mistakes get one line naming what is wrong (exit code 2), never a traceback, and write nothing;
`--out` never mixes two runs in one folder nor scatters files into the working directory."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cfl_core.cli import main
from cfl_core.run_reader import load_run

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--clusters", "2", "--clients-per-cluster", "2", "--samples-per-client", "30", "--local-epochs", "1",
        "--device", "cpu"]


def one_line(capsys, argv, code=2) -> str:
    """Run the CLI in this process; it must return `code` and print exactly one line on stderr."""
    assert main(argv) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_out_twice_is_refused_and_overwrite_replaces_the_run(tmp_path, capsys):
    out = str(tmp_path / "x")
    assert main(["run", *TINY, "--algorithm", "clove", "--models", "2", "--rounds", "3", "--out", out]) == 0
    capsys.readouterr()
    line = one_line(capsys, ["run", *TINY, "--algorithm", "ifca", "--models", "2", "--rounds", "2", "--out", out])
    assert "--out=" in line and "already holds files" in line and "--overwrite" in line
    saved = load_run(out)
    assert [r.round for r in saved.records] == [0, 1, 2] and saved.summary["algorithm"] == "clove"
    assert main(["run", *TINY, "--algorithm", "ifca", "--models", "2", "--rounds", "2", "--out", out,
                 "--overwrite"]) == 0
    saved = load_run(out)
    assert [r.round for r in saved.records] == [0, 1] and saved.config["algorithm"] == "ifca"
    assert saved.summary["algorithm"] == "ifca"


def test_an_empty_out_is_refused_and_nothing_lands_in_the_working_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for value in ("", "  "):
        assert "a folder path" in one_line(capsys, ["run", *TINY, "--algorithm", "fedavg", "--out", value])
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("command", [
    ["run", *TINY, "--algorithm", "fedavg"],
    ["partition", "--dataset", "digits"],
    ["compare", "--algorithms", "fedavg,oracle", *TINY],
])
def test_out_that_cannot_be_a_folder(tmp_path, capsys, command):
    existing = tmp_path / "file"
    existing.write_text("x")
    assert "that path is a file" in one_line(capsys, [*command, "--out", str(existing)])
    line = one_line(capsys, [*command, "--out", "/proc/cfl-lab-test/x"])
    assert "--out='/proc/cfl-lab-test/x'" in line and "a folder that can be created" in line
    assert existing.read_text() == "x"


def test_an_unwritable_out_folder(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "ro"
    folder.mkdir()
    real = os.access
    # the tests run as root (chmod does not stop root): what is tested is that the check is made
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(folder) else real(p, mode))
    line = one_line(capsys, ["run", *TINY, "--algorithm", "fedavg", "--out", str(folder)])
    assert "a folder this user may write to" in line


@pytest.mark.parametrize("content, expected", [
    ('{"options": "abc"}', "options='abc' is not allowed: a JSON object"),
    ('{"options": null}', "options=None is not allowed: a JSON object"),
    ('{"shift_options": [1, 2]}', "shift_options=[1, 2] is not allowed: a JSON object"),
    ('{"unsupervised": "false"}', "unsupervised='false' is not allowed: true or false"),
    ('[1]', "a JSON object of config fields"),
    ('{"rounds": ', "valid JSON"),
])
def test_bad_config_files(tmp_path, capsys, content, expected):
    path = tmp_path / "c.json"
    path.write_text(content)
    assert expected in one_line(capsys, ["run", "--config", str(path), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_a_config_that_is_not_utf8_or_a_directory(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_bytes(b"\xff\xfe{}")
    assert "a UTF-8 text file" in one_line(capsys, ["run", "--config", str(path), "--out", str(tmp_path / "o")])
    assert "not a directory" in one_line(capsys, ["run", "--config", str(tmp_path), "--out", str(tmp_path / "o")])


@pytest.mark.parametrize("flag, value, allowed", [
    ("--rounds", "1e20", "rounds=1.000e+20 is not allowed: a whole number in [1, 100000]"),
    ("--clusters", "1e300", "clusters=1.000e+300 is not allowed: a whole number in [1, 1000]"),
    ("--models", "100000", "models=100000 is not allowed: a whole number of models in [1, 10000]"),
    ("--local-epochs", "5000", "local_epochs=5000 is not allowed"),
    ("--seed", "1e20", "seed=1.000e+20 is not allowed"),
])
def test_caps_name_the_field_given(tmp_path, capsys, flag, value, allowed):
    argv = ["run", "--algorithm", "clove", "--models", "2", *TINY, flag, value, "--out", str(tmp_path / "o")]
    assert allowed in one_line(capsys, argv)


def test_more_models_than_clients_is_refused_before_any_memory_is_taken(tmp_path, capsys):
    for algorithm in ("clove", "ifca", "fesem"):
        line = one_line(capsys, ["run", "--algorithm", algorithm, *TINY, "--models", "5",
                                 "--out", str(tmp_path / algorithm)])
        assert "models=5 is not allowed: at most the number of clients (4)" in line


def test_shift_options_need_a_shift(tmp_path, capsys):
    line = one_line(capsys, ["run", "--algorithm", "fedavg", *TINY, "--shift-option", "probability=0.5",
                             "--out", str(tmp_path / "o")])
    assert "--shift-option" in line and "only with a distribution shift" in line


@pytest.mark.parametrize("flag, value", [("--repeats", "0"), ("--matmul-n", "-1"), ("--sequential-repeats", "0"),
                                         ("--samples", "0")])
def test_bench_numbers_below_their_least_value(capsys, flag, value):
    assert f"{flag}={value} is not allowed" in one_line(capsys, ["bench", "--quick", flag, value])


def test_in_a_real_process_a_mistake_is_one_line_without_a_traceback(tmp_path):
    (tmp_path / "f").write_text("")
    proc = subprocess.run([sys.executable, "-m", "cfl_core", "run", "--algorithm", "fedavg", "--out",
                           str(tmp_path / "f")], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"error: --out={str(tmp_path / 'f')!r} is not allowed: a folder: "
                                                "that path is a file"]
