"""The one walk over a runs folder (run_reader.walk_run_folders) and the JSON writer the core and the dashboard share."""
import json
import math
import os
import time

import pytest

from cfl_core.jsonio import read_json, write_json_atomic
from cfl_core.records import RunWriter
from cfl_core.run_reader import list_runs, walk_run_folders


def _run(folder, *extra):
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", *extra):
        (folder / name).write_text("{}")
    return folder


def test_markers_depth_names_and_symlinks(tmp_path):
    _run(tmp_path / "a")
    _run(tmp_path / "b" / "c" / "d")  # three levels down
    _run(tmp_path / "job", "ui.json")  # both markers: the first listed wins
    _run(tmp_path / "job" / "inner")  # never reported: the walk does not enter a reported folder
    _run(tmp_path / ".hidden")
    (tmp_path / "file").write_text("")
    os.symlink(tmp_path / "b", tmp_path / "link")

    found = {rel: marker for rel, _, marker in walk_run_folders(tmp_path, markers=("ui.json", "config.json"),
                                                                    max_depth=3, accept=lambda n: n[0] != ".")}
    assert found == {("a",): "config.json", ("b", "c", "d"): "config.json", ("job",): "ui.json"}
    shallow = {rel for rel, _, _ in walk_run_folders(tmp_path, max_depth=2)}
    assert shallow == {("a",), ("job",), (".hidden",)}  # d is too deep; no filter: the hidden folder too
    # symbolic links are never followed: a linked run folder is not reported, a linked folder not entered,
    # and a linked marker file does not make a folder a run folder
    os.symlink(tmp_path / "a", tmp_path / "alink")
    (tmp_path / "e").mkdir()
    os.symlink(tmp_path / "a" / "config.json", tmp_path / "e" / "config.json")
    found = {rel for rel, _, _ in walk_run_folders(tmp_path, max_depth=3)}
    assert ("alink",) not in found and ("link", "c", "d") not in found and ("e",) not in found
    assert ("a",) in found and ("b", "c", "d") in found
    assert list(walk_run_folders(tmp_path / "missing")) == []


def test_list_runs_is_the_top_level_walk_newest_first(tmp_path):
    old, new = _run(tmp_path / "old"), _run(tmp_path / "new")
    _run(tmp_path / "group" / "deep")
    past = time.time() - 100
    os.utime(old / "config.json", (past, past))
    assert list_runs(tmp_path) == [new, old]
    assert list_runs(tmp_path / "missing") == []


def test_one_atomic_writer(tmp_path):
    path = tmp_path / "x.json"
    write_json_atomic(path, {"b": 1, "a": [1.5, None]})
    assert path.read_text() == '{\n "a": [\n  1.5,\n  null\n ],\n "b": 1\n}'
    assert read_json(path) == {"a": [1.5, None], "b": 1} and os.listdir(tmp_path) == ["x.json"]  # no temp file left
    with pytest.raises(TypeError):
        write_json_atomic(path, {"when": object()})  # JSON cannot hold it and no default was given
    assert read_json(path) == {"a": [1.5, None], "b": 1}  # the old file is untouched
    write_json_atomic(path, {"p": tmp_path}, default=str)
    assert read_json(path) == {"p": str(tmp_path)}
    (tmp_path / "bad.json").write_text("{")
    assert read_json(tmp_path / "bad.json") is None and read_json(tmp_path / "none.json") is None
    # the run writer is the same writer over cleaned data (6 significant digits, NaN -> null)
    RunWriter(tmp_path / "run").write_json("summary.json", {"v": 1 / 3, "n": math.nan})
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == {"n": None, "v": 0.333333}
