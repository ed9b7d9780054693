"""The `datasets` and `partition` subcommands, run in-process through the CLI entry point."""
import json
import subprocess
import sys

import pytest

from cfl_core.cli import main
from cfl_core.data import SOURCES


def test_datasets_table(capsys):
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    for name in SOURCES:
        assert name in out
    assert "1x8x8" in out and "built in" in out


def test_datasets_json(capsys):
    assert main(["datasets", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == list(SOURCES)
    digits = rows[0]
    assert digits["available"] and digits["shape"] == [1, 8, 8] and digits["classes"] == 10
    for r in rows:
        assert r["available"] or r["how_to_get"]


def test_datasets_download_of_unknown_name_is_one_line(capsys):
    assert main(["datasets", "--download", "imagenet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "dataset='imagenet'" in err


ARGS = ["partition", "--dataset", "digits", "--partition", "concept-shift", "--clusters", "3",
        "--clients-per-cluster", "4", "--samples-per-client", "40", "--within", "dirichlet", "--alpha", "0.3",
        "--quantity-skew", "0.5", "--seed", "9"]


def test_partition_file_is_byte_identical_for_the_same_args(tmp_path, capsys):
    assert main(ARGS + ["--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "cluster 0: 4 clients" in out and "cluster 2" in out and "partition.json" in out
    assert main(ARGS + ["--out", str(tmp_path / "b")]) == 0
    a = (tmp_path / "a" / "partition.json").read_bytes()
    assert a == (tmp_path / "b" / "partition.json").read_bytes()
    doc = json.loads(a)
    assert doc["config"]["seed"] == 9 and doc["config"]["within"] == "dirichlet"
    assert len(doc["clients"]) == 12 and doc["clients"][11]["cluster"] == 2
    assert "label_map" in doc["clients"][4]["transform"]
    other = ARGS[:-1] + ["10", "--out", str(tmp_path / "c")]
    assert main(other) == 0
    assert (tmp_path / "c" / "partition.json").read_bytes() != a


def test_partition_as_a_subprocess(tmp_path):
    cmd = [sys.executable, "-m", "cfl_core", "partition", "--dataset", "synthetic-linear",
           "--partition", "linear-mixture", "--clusters", "2", "--clients-per-cluster", "2", "--out", str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "partition.json").read_text())
    assert len(doc["truth"]["theta"]) == 2 and doc["clients"][3]["transform"] == {"theta": 1}


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--clusters", "0"], "clusters=0"),
        (["--partition", "label-skew-4"], "samples_per_client=60"),
        (["--partition", "spiral"], "partition='spiral'"),
        (["--within", "dirichlet", "--alpha", "-1"], "alpha=-1.0"),
    ],
)
def test_partition_errors_are_one_line(tmp_path, capsys, extra, needle):
    code = main(["partition", "--dataset", "digits", "--out", str(tmp_path)] + extra)
    err = capsys.readouterr().err
    assert code != 0
    assert err.startswith("error: ") and err.count("\n") == 1 and needle in err
    assert "Traceback" not in err
    assert not (tmp_path / "partition.json").exists()


def test_rotation_on_vector_source_is_refused(tmp_path, capsys):
    assert main(["partition", "--dataset", "synthetic-blobs", "--partition", "feature-skew", "--out", str(tmp_path)]) == 2
    assert "partition='feature-skew'" in capsys.readouterr().err


def test_help_texts(capsys):
    for command in ("datasets", "partition"):
        with pytest.raises(SystemExit) as done:
            main([command, "--help"])
        assert done.value.code == 0
    out = capsys.readouterr().out
    assert "--samples-per-client" in out and "label-skew-2" in out and "--json" in out
