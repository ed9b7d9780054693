"""Hostile inputs (issue 32's adversarial pass), one regression test each: deeply nested JSON in a link's
options, shift_options and algo_options; non-UTF-8 and deeply nested sweep specs; malformed FEMNIST JSON,
AG News CSV and IDX files, NaN pixels and a gzip bomb; and memory bounded for the CLI's run, compare and sweep.
Each is refused with one line naming the value or the file and what is wrong, never a traceback."""
from __future__ import annotations

import gzip
import json
import struct
import tracemalloc

import numpy as np
import pytest

from cfl_core.cli import main
from cfl_core.config import load_config_file
from cfl_core.data.agnews import read_csv
from cfl_core.data.bad_file import BadDataFile
from cfl_core.data.femnist import PIXELS, read_users
from cfl_core.data.idx import IdxFormatError, read_idx
from cfl_core.errors import ConfigError
from cfl_ui.form import url_codec as params

DEEP = 100_000  # brackets: json.loads raised RecursionError on these before


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in "\n".join(err), err
    assert len(errors[0]) < 1000, errors[0]
    return errors[0]


# -- links ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["options", "shift_options"])
@pytest.mark.parametrize("text", ["[" * DEEP + "]" * DEEP, '{"a":' * 40 + "1" + "}" * 40, "{" * DEEP])
def test_a_link_with_deeply_nested_json_is_one_short_note(key, text):
    config, _, problems = params.decode({"algorithm": "cfl", "shift": "swap-all", key: text})
    assert key not in config
    assert len(problems) == 1 and problems[0].startswith(f"{key}=") and len(problems[0]) < 600, problems
    assert "nested" in problems[0] or "JSON object" in problems[0]


def test_a_config_file_with_a_deeply_nested_value_is_one_short_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"models": 4, "options": {"eps1": ' + "[" * 500 + "]" * 500 + "}}")
    with pytest.raises(ConfigError) as err:
        load_config_file(str(path)).validate()
    assert err.value.parameter == "options.eps1" and "nested more than" in str(err.value) and len(str(err.value)) < 600
    path.write_text('{"options": ' + "[" * DEEP + "]" * DEEP + "}")
    with pytest.raises(ConfigError, match="not nested hundreds of levels deep"):
        load_config_file(str(path))


@pytest.mark.parametrize("page", [None, "pages/compare.py", "pages/ifca_init.py", "pages/partitions.py"])
def test_every_page_survives_a_link_with_deeply_nested_json(page):
    """`/`, `/compare`, `/ifca-init` and `/partitions` crashed on such a link; now they draw, with a note."""
    from tests.test_ui_pages import app

    deep = "[" * 10_000 + "]" * 10_000  # 20 KB: within what a browser sends, ten times the recursion limit
    at = app(page, {"options": deep, "shift_options": deep, "algo_options": deep, "algos": "clove,ifca"})
    assert not at.exception, [e.value for e in at.exception][:1]
    notes = " ".join(w.value for w in at.warning)
    assert "in the link was ignored" in notes and len(notes) < 3000


# -- sweep specs ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, content, says", [
    ("latin1.yaml", b"name: x\nbase: {dataset: digits\xff}\ngrid: {seed: [0]}\n", "UTF-8"),
    ("latin1.json", b'{"grid": {"seed": [0]}, "description": "caf\xe9"}', "UTF-8"),
    ("deep.json", b'{"grid": {"seed": ' + b"[" * DEEP + b"]" * DEEP + b"}}", "nested"),
    ("deep.yaml", b"grid:\n  seed: " + b"[" * DEEP + b"]" * DEEP + b"\n", "nested"),
    ("deep-value.json", b'{"base": {"models": 4, "options": {"eps1": ' + b"[" * 500 + b"]" * 500
     + b'}}, "grid": {"seed": [0]}}', "nested"),  # the spec reader's own depth bound says it first
])
def test_a_hostile_sweep_spec_is_one_line(tmp_path, capsys, name, content, says):
    spec = tmp_path / name
    spec.write_bytes(content)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--executor", "serial"]) == 2
    assert says in one_error_line(capsys)
    assert not (tmp_path / "out").exists()


# -- data readers ----------------------------------------------------------------------------------------------
def _leaf(tmp_path, users, counts=None, data=None, raw: str | None = None) -> str:
    path = tmp_path / "part.json"
    if raw is not None:
        path.write_text(raw)
    else:
        doc = {"users": users, "user_data": data}
        if counts is not None:
            doc["num_samples"] = counts
        path.write_text(json.dumps(doc))
    return str(path)


GOOD_X = [[0.5] * PIXELS]


@pytest.mark.parametrize("case, says", [
    (dict(users=[["u"]], data={}), "distinct user ids"),
    (dict(users=["u", "u"], data={"u": {"x": GOOD_X, "y": [1]}}), "distinct user ids"),
    (dict(users=["u"], counts="1", data={"u": {"x": GOOD_X, "y": [1]}}), "num_samples"),
    (dict(users=["u"], counts=[2], data={"u": {"x": GOOD_X, "y": [1]}}), "expected 2 samples"),
    (dict(users=["u"], data={"u": {"x": {"a": 1}, "y": [1]}}), "expected None samples"),
    (dict(users=["u"], data={"u": {"x": [[0.5] * 10], "y": [1]}}), f"list of {PIXELS} pixels"),
    (dict(users=["u"], data={"u": {"x": [["a"] * PIXELS], "y": [1]}}), "not numbers"),
    (dict(users=["u"], data={"u": {"x": GOOD_X, "y": [1.5]}}), "whole numbers"),
    (dict(users=["u"], data={"u": {"x": GOOD_X, "y": [99]}}), "labels must be 0..61"),
    (dict(users=["u"], data={"u": {"x": [[float("nan")] + [0.5] * (PIXELS - 1)], "y": [1]}}), "not finite"),
    (dict(users=["u"], data={"u": {"x": [[float("inf")] * PIXELS], "y": [1]}}), "not finite"),
    (dict(users=[], data=None, raw="[" * DEEP), "nested"),
    (dict(users=[], data=None, raw="{not json"), "not JSON"),
])
def test_a_malformed_femnist_file_names_the_file_and_the_fault(tmp_path, case, says):
    path = _leaf(tmp_path, **case)
    with pytest.raises(BadDataFile) as err:
        read_users(path)
    assert path in str(err.value) and says in str(err.value)


def test_femnist_nan_pixels_are_refused_from_the_cli_before_training(tmp_path, monkeypatch, capsys):
    """NaN pixels were accepted, and the divergence they caused was blamed on the learning rate."""
    from tests.test_data_femnist_agnews import write_leaf

    monkeypatch.setenv("CFL_DATA_DIR", str(tmp_path))
    write_leaf(tmp_path / "femnist")
    victim = sorted((tmp_path / "femnist" / "train").glob("*.json"))[0]
    doc = json.loads(victim.read_text())
    first = doc["users"][0]
    doc["user_data"][first]["x"][0][3] = float("nan")
    victim.write_text(json.dumps(doc))
    code = main(["run", "--dataset", "femnist", "--partition", "iid", "--clusters", "1", "--clients-per-cluster", "2",
                 "--samples-per-client", "10", "--rounds", "1", "--algorithm", "fedavg", "--device", "cpu",
                 "--out", str(tmp_path / "run")])
    line = one_error_line(capsys)
    assert code == 2 and str(victim) in line and "not finite" in line and "learning rate" not in line


@pytest.mark.parametrize("rows, says", [
    ("\u00b2,title,text\n", "class index"),  # '²' passes str.isdigit() but int() raised ValueError
    ("5,title,text\n", "class index"),
    ("1,title\n", "class index"),
    ("", "no rows"),
    ('1,"' + "x" * 200_000 + '",b\n', "not a readable CSV"),
])
def test_a_malformed_ag_news_csv_names_the_file_and_the_line(tmp_path, rows, says):
    path = tmp_path / "train.csv"
    path.write_text(rows, encoding="utf-8")
    with pytest.raises(BadDataFile) as err:
        read_csv(str(path), 10)
    assert str(path) in str(err.value) and says in str(err.value)


def test_an_ag_news_test_file_past_its_bound_is_refused(tmp_path, monkeypatch):
    import cfl_core.data.agnews as agnews

    monkeypatch.setattr(agnews, "MAX_TEST_ROWS", 5)
    path = tmp_path / "test.csv"
    path.write_text("1,a,b\n" * 6)
    with pytest.raises(BadDataFile, match="more than 5 rows"):
        read_csv(str(path), None)


def test_a_gzip_bomb_idx_is_refused_from_its_header_without_inflating_it(tmp_path):
    """2 MB of gzip declaring 4.5 GB of images took 4.5 GB before being refused; now its header is enough."""
    path = tmp_path / "train-images-idx3-ubyte.gz"
    count = 4_500_000_000 // (28 * 28)
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(bytes([0, 0, 8, 3]) + struct.pack(">3I", count, 28, 28))
        zeros = bytes(2**20)
        for _ in range(300):  # 300 MB of zeros: about 0.3 MB of gzip
            fh.write(zeros)
    tracemalloc.start()
    try:
        with pytest.raises(IdxFormatError, match=r"declare 4,499,999,280 data bytes, more than the 536,870,912"):
            read_idx(str(path), dtype=np.uint8, ndim=3, tail=(28, 28))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, f"{peak / 2**20:.0f} MB taken to refuse it"


def test_an_idx_file_holding_more_than_it_declares_is_refused_after_one_byte_more(tmp_path):
    path = tmp_path / "labels.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(bytes([0, 0, 8, 1]) + struct.pack(">I", 10) + bytes(10))
        for _ in range(100):
            fh.write(bytes(2**20))  # 100 MB past the declared 10 bytes
    tracemalloc.start()
    try:
        with pytest.raises(IdxFormatError, match="need 10 data bytes, file has more than 10"):
            read_idx(str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20


def test_an_idx_file_of_the_wrong_type_or_shape_is_refused_from_its_header(tmp_path):
    path = tmp_path / "x"
    path.write_bytes(bytes([0, 0, 0x0D, 3]) + struct.pack(">3I", 1, 28, 28) + bytes(4 * 784))
    with pytest.raises(IdxFormatError, match="expected uint8"):
        read_idx(str(path), dtype=np.uint8, ndim=3, tail=(28, 28))
    path.write_bytes(bytes([0, 0, 8, 3]) + struct.pack(">3I", 1, 27, 28) + bytes(27 * 28))
    with pytest.raises(IdxFormatError, match="expected 28x28 items"):
        read_idx(str(path), dtype=np.uint8, ndim=3, tail=(28, 28))


# -- memory ---------------------------------------------------------------------------------------------------
HUGE = ["--clusters", "4", "--clients-per-cluster", "25000", "--sample-with-replacement", "true", "--device", "cpu"]


def test_the_cli_refuses_a_run_the_machine_cannot_hold_with_the_estimate_and_the_limit(tmp_path, capsys):
    """100,000 clients reached 5.5 GB in 90 s with no estimate; now the estimate refuses them before any data."""
    assert main(["run", "--models", "4", *HUGE, "--memory-mb", "2000", "--out", str(tmp_path / "run")]) == 2
    line = one_error_line(capsys)
    assert line.startswith("error: memory='about ") and "at most 2.0 GB (--memory-mb 2000)" in line
    assert "--memory-mb" in line.split("raise the limit knowingly with")[1]
    assert not (tmp_path / "run").exists()


def test_memory_mb_raises_or_lowers_the_limit_knowingly(tmp_path, capsys):
    small = ["--models", "2", "--clusters", "2", "--clients-per-cluster", "2", "--samples-per-client", "10",
             "--rounds", "1", "--device", "cpu"]
    assert main(["run", *small, "--memory-mb", "1", "--out", str(tmp_path / "a")]) == 2
    assert "at most 1.0 MB (--memory-mb 1)" in one_error_line(capsys)
    assert main(["run", *small, "--memory-mb", "0", "--out", str(tmp_path / "a")]) == 2
    assert "memory-mb=0 is not allowed" in one_error_line(capsys)
    assert main(["run", *small, "--memory-mb", "500", "--out", str(tmp_path / "b")]) == 0


def test_compare_and_sweep_refuse_what_their_runs_at_once_cannot_hold(tmp_path, capsys):
    assert main(["compare", "--algorithms", "clove,ifca", *HUGE, "--memory-mb", "4000",
                 "--out", str(tmp_path / "cmp")]) == 2
    line = one_error_line(capsys)
    assert "at most 3.9 GB (--memory-mb 4000)" in line and not (tmp_path / "cmp").exists()
    spec = tmp_path / "huge.json"
    spec.write_text(json.dumps({"base": {"clusters": 4, "clients_per_cluster": 25000, "models": 4,
                                         "sample_with_replacement": True, "device": "cpu"},
                                "grid": {"seed": [0, 1, 2]}}))
    assert main(["sweep", str(spec), "--workers", "3", "--memory-mb", "4000", "--out", str(tmp_path / "sw")]) == 2
    line = one_error_line(capsys)
    assert "3 of these 3 runs at once" in line and not (tmp_path / "sw").exists()
