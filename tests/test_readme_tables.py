"""scripts/readme_tables.py and the pivot it draws: a row per algorithm, a column per partition, reference figures."""
import importlib.util
import re
from pathlib import Path

from cfl_core.sweep.tables import pivot_cell, pivot_table

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "scripts" / "readme_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(partition, algorithm, seed, accuracy, ari, status="finished"):
    return {"partition": partition, "algorithm": algorithm, "seed": str(seed), "status": status,
            "final_accuracy": accuracy, "final_ari": ari}


ROWS = [_row("iid", "clove", 0, 0.9, 1.0), _row("iid", "clove", 1, 0.8, 0.5),
        _row("iid", "fedpac", 0, 0.7, None), _row("iid", "fedpac", 1, 0.75, None),
        _row("concept-shift", "clove", 0, 0.6, 1.0), _row("concept-shift", "clove", 1, None, None, status="failed"),
        _row("concept-shift", "fedpac", 0, 0.5, None)]


def test_pivot_cells_are_means_over_seeds_and_ari_not_applicable_without_any():
    assert pivot_cell([0.9, 0.8], "final_accuracy") == "85.0 ± 7.1"
    assert pivot_cell([1.0, 0.5], "final_ari") == "0.75 ± 0.35 (1/2)"
    assert pivot_cell([None, None], "final_ari") == "n/a"
    assert pivot_cell([], "final_ari") == "-"
    assert pivot_cell([212.4, 230.6], "seconds") == "222 ± 13"  # what a cell's runs took


def test_the_pivot_has_a_row_per_algorithm_and_names_cells_not_finished():
    table, notes = pivot_table(ROWS, "final_accuracy")
    lines = table.splitlines()
    assert lines[0] == "| algorithm | iid | concept-shift |"
    assert lines[2] == "| clove | 85.0 ± 7.1 | 60.0 [1 of 2 runs] |"  # the failed seed is left out ...
    assert lines[3] == "| fedpac | 72.5 ± 3.5 | 50.0 |"
    assert notes == ["concept-shift, clove: 1 of 2 runs not finished"]  # ... and said so
    ari, _ = pivot_table(ROWS, "final_ari")
    assert ari.splitlines()[3] == "| fedpac | n/a | n/a |"


def test_reference_figures_sit_beside_ours_and_a_missing_one_is_a_dash():
    table, _ = pivot_table(ROWS, "final_accuracy", reference={("iid", "clove"): 0.913})
    lines = table.splitlines()
    assert lines[0] == "| algorithm | iid | paper | concept-shift | paper |"
    assert lines[2] == "| clove | 85.0 ± 7.1 | 91.3 | 60.0 [1 of 2 runs] | — |"


def test_readme_tables_splices_a_pivot_under_its_marker_and_checks_it(tmp_path):
    runs = tmp_path / "runs"
    (runs / "tiny").mkdir(parents=True)
    header = "key,folder,status,partition,algorithm,seed,final_accuracy,best_accuracy,final_loss,final_ari\n"
    body = "".join(f"k{i},f{i},{r['status']},{r['partition']},{r['algorithm']},{r['seed']},"
                   f"{'' if r['final_accuracy'] is None else r['final_accuracy']},,,"
                   f"{'' if r['final_ari'] is None else r['final_ari']}\n" for i, r in enumerate(ROWS))
    (runs / "tiny" / "results.csv").write_text(header + body)
    reference = tmp_path / "paper.csv"
    reference.write_text("partition,algorithm,final_accuracy,where\niid,fedpac,0.801,Table 9\n")
    readme = tmp_path / "README.md"
    readme.write_text("intro\n\n<!-- sweep: tiny pivot=final_ari -->\n| old |\n|---|\n| x |\n\n"
                      f"<!-- sweep: tiny pivot=final_accuracy reference={reference} -->\n| old |\n\nend\n")
    script = _script()
    args = ["--readme", str(readme), "--runs", str(runs)]
    assert script.main(args) == 1  # written, and the cell with a failed run is reported
    text = readme.read_text()
    assert "| clove | 0.75 ± 0.35 (1/2) | 1.00 (1/1) [1 of 2 runs] |\n| fedpac | n/a | n/a |\n\n<!--" in text
    # the reference has a figure for iid only: a paper column after iid, none after concept-shift
    assert "| algorithm | iid | paper | concept-shift |\n" in text
    assert "| fedpac | 72.5 ± 3.5 | 80.1 | 50.0 |\n\nend\n" in text and "| old |" not in text
    (runs / "tiny" / "results.csv").write_text(header + body.replace("failed", "finished").replace(",,,,\n", ",0.6,,,\n", 1))
    assert script.main(["--check", *args]) == 1  # the README now differs from the sweep: said, nothing written
    assert readme.read_text() == text
    assert script.main(args) == 0 and script.main(["--check", *args]) == 0


def test_a_partition_without_any_reference_figure_gets_no_paper_column():
    script = _script()
    table, _ = pivot_table(ROWS, "final_accuracy", reference={("iid", "clove"): 0.913})
    lines = script.drop_empty_reference_columns(table.splitlines())
    assert lines[0] == "| algorithm | iid | paper | concept-shift |"  # concept-shift has no figure: no column
    assert lines[1] == "|---|---|---|---|"
    assert lines[2] == "| clove | 85.0 ± 7.1 | 91.3 | 60.0 [1 of 2 runs] |"
    assert lines[3] == "| fedpac | 72.5 ± 3.5 | — | 50.0 |"  # a missing figure in a kept column stays a dash
    empty, _ = pivot_table(ROWS, "final_accuracy", reference={})
    assert script.drop_empty_reference_columns(empty.splitlines())[0] == "| algorithm | iid | concept-shift |"


def _refused(script, path, measure="final_accuracy"):
    try:
        script.read_reference(path, measure)
    except SystemExit as stop:
        return str(stop)
    raise AssertionError(f"{path.read_text()!r} was accepted")


def test_a_bad_reference_file_is_refused_with_the_line_that_is_wrong(tmp_path):
    script = _script()
    path = tmp_path / "paper.csv"
    assert "no such file" in _refused(script, path)
    path.write_text("partition,algorithm,final_accuracy\niid,clove,0.9\n")
    assert "no column where" in _refused(script, path)
    path.write_text("partition,algorithm,final_accuracy,where\niid,clove,0.9,Table 2\niid,ifca,91.3,Table 2\n")
    message = _refused(script, path)
    assert "line 3" in message and "'91.3'" in message and "fraction" in message  # a percentage, not a fraction
    path.write_text("partition,algorithm,final_accuracy,where\niid,clove,n/a,Table 2\n")
    assert "line 2" in _refused(script, path)
    path.write_text("partition,algorithm,final_accuracy,where\niid,clove,0.9,\n")
    assert "no 'where'" in _refused(script, path)
    path.write_text("partition,algorithm,final_accuracy,where\niid,clove,0.9,T2\niid,clove,0.8,T3\n")
    assert "given twice" in _refused(script, path)
    path.write_text("partition,algorithm,final_accuracy,final_ari,where\niid,clove,,0.5,T2\niid,ifca,0.7,,T2\n")
    assert script.read_reference(path, "final_accuracy") == {("iid", "ifca"): 0.7}  # an ARI-only row is skipped
    assert script.read_reference(path, "final_ari") == {("iid", "clove"): 0.5}


def test_the_committed_paper_figures_are_readable_and_sourced():
    script = _script()
    files = sorted((ROOT / "sweeps").glob("clove-paper-*.csv"))
    assert files
    for path in files:
        figures = script.read_reference(path, "final_accuracy")  # refuses a figure without its source
        assert all(0 <= f <= 1 for f in figures.values())


def test_every_table_of_make_tables_has_its_marker_in_the_results_page_and_none_is_left_in_the_readme():
    """The results tables live in the manual (docs/results.md); `make tables` writes there by default."""
    script = _script()
    makefile = (ROOT / "Makefile").read_text()
    declared = re.search(r"^TABLES := ((?:.*\\\n)*.*)$", makefile, re.M).group(1)
    names = set(declared.replace("\\", " ").split())
    page = (ROOT / "docs" / "results.md").read_text().splitlines()
    marked = {m.group(1) for line in page if (m := script.MARKER.match(line))}
    assert names and names == marked
    assert all((ROOT / "sweeps" / f"{name}.yaml").is_file() for name in names)
    assert "<!-- sweep:" not in (ROOT / "README.md").read_text()
    assert Path(script.RESULTS_PAGE) == ROOT / "docs" / "results.md"


def _condition_sweep(runs, epsilon_of):
    """A sweep folder pivoted by dp_noise: results.csv and each finished run's summary.json (dp_epsilon)."""
    import json

    rows = [("0.0", "clove", 0, 1.0, "finished"), ("0.0", "clove", 1, 1.0, "finished"),
            ("1.0", "clove", 0, 0.2, "finished"), ("1.0", "clove", 1, 0.4, "finished"),
            ("0.0", "ifca", 0, 0.5, "finished"), ("1.0", "ifca", 0, 0.0, "finished"),
            ("1.0", "ifca", 1, None, "failed")]
    folder = runs / "dp"
    folder.mkdir(parents=True)
    lines = ["key,folder,status,dp_noise,algorithm,seed,final_accuracy,final_ari"]
    for i, (noise, algorithm, seed, ari, status) in enumerate(rows):
        run = f"noise{noise}/seed{seed}/{algorithm}"
        lines.append(f"k{i},{run},{status},{noise},{algorithm},{seed},0.9,{'' if ari is None else ari}")
        (folder / run).mkdir(parents=True)
        summary = {"status": status}
        if noise != "0.0":
            summary["dp_epsilon"] = epsilon_of(algorithm, seed)
        (folder / run / "summary.json").write_text(json.dumps(summary))
    (folder / "results.csv").write_text("\n".join(lines) + "\n")
    return folder


def test_a_pivot_by_another_field_and_a_summary_headline_such_as_epsilon(tmp_path):
    runs = tmp_path / "runs"
    _condition_sweep(runs, lambda algorithm, seed: {"clove": 4000.0, "ifca": 6.0}[algorithm] + seed * 2)
    page = tmp_path / "results.md"
    page.write_text("<!-- sweep: dp pivot=final_ari columns=dp_noise -->\n| old |\n\n"
                    "<!-- sweep: dp pivot=dp_epsilon columns=dp_noise -->\n| old |\n\nend\n")
    script = _script()
    args = ["--page", str(page), "--runs", str(runs)]
    assert script.main(args) == 1  # written; the failed ifca run is named
    text = page.read_text()
    header = "| algorithm | dp_noise=0.0 | dp_noise=1.0 |\n|---|---|---|\n"
    assert header + "| clove | 1.00 ± 0.00 (2/2) | 0.30 ± 0.14 (0/2) |\n| ifca | 0.50 (0/1) | 0.00 (0/1) [1 of 2 runs] |\n" in text
    # epsilon: the mean over the seeds that finished (4000, 4002 -> 4,001; the failed ifca seed left out: 6),
    # "-" where no run was noised
    assert header + "| clove | - | 4,001 |\n| ifca | - | 6 [1 of 2 runs] |\n\nend\n" in text
    assert script.main(["--check", *args]) == 1  # the failed run keeps it unfinished ...
    assert page.read_text() == text  # ... and --check writes nothing


def test_a_summary_headline_that_is_not_a_number_or_a_field_that_was_not_swept_is_one_line(tmp_path):
    import pytest

    runs = tmp_path / "runs"
    _condition_sweep(runs, lambda algorithm, seed: "lots")
    page = tmp_path / "results.md"
    page.write_text("<!-- sweep: dp pivot=dp_epsilon columns=dp_noise -->\n| old |\n")
    script = _script()
    with pytest.raises(SystemExit, match=r"dp_epsilon 'lots' is not a finite number"):
        script.main(["--page", str(page), "--runs", str(runs)])
    page.write_text("<!-- sweep: dp pivot=final_ari columns=dropout_rate -->\n| old |\n")
    with pytest.raises(SystemExit, match=r"columns=dropout_rate: not a swept field"):
        script.main(["--page", str(page), "--runs", str(runs)])
    (runs / "dp" / "noise1.0" / "seed0" / "clove" / "summary.json").write_text("{not json")
    page.write_text("<!-- sweep: dp pivot=dp_epsilon columns=dp_noise -->\n| old |\n")
    with pytest.raises(SystemExit, match=r"summary.json: not JSON"):
        script.main(["--page", str(page), "--runs", str(runs)])
    assert page.read_text() == "<!-- sweep: dp pivot=dp_epsilon columns=dp_noise -->\n| old |\n"


def test_one_pivot_over_several_sweeps_reads_a_running_or_unstarted_one_from_its_spec(tmp_path):
    """`with=`: the CLoVE-paper tables put a column per spec in one table; a sweep stopped part way (no
    results.csv) is read from its spec and its run folders, one never started is all "not finished"."""
    import json
    import shutil

    from cfl_core.sweep import SweepSpec, run_sweep

    specs, runs = tmp_path / "sweeps", tmp_path / "runs"
    specs.mkdir()
    tiny = {"clusters": 2, "clients_per_cluster": 2, "samples_per_client": 20, "rounds": 2}
    for name, partition in (("a", "label-skew-1"), ("b", "concept-shift"), ("c", "feature-skew")):
        spec = {"name": name, "base": {**tiny, "partition": partition},
                "grid": {"algorithm": ["oracle", "fedavg"], "seed": [0, 1]}, "folder": "seed{seed}/{algorithm}"}
        (specs / f"{name}.yaml").write_text(json.dumps(spec))  # JSON is YAML
    for name in ("a", "b"):
        run_sweep(SweepSpec.from_file(specs / f"{name}.yaml"), runs / name, executor="serial")
    # b stopped part way: no tables written yet, one run not done (its folder half written)
    (runs / "b" / "results.csv").unlink()
    shutil.rmtree(runs / "b" / "seed1" / "fedavg")
    (runs / "b" / "seed1" / "fedavg").mkdir()
    (runs / "a" / "results.csv").write_text("key,folder,status,algorithm,seed\n")  # stale: the folder is what counts
    page = tmp_path / "paper.md"
    page.write_text("<!-- sweep: a pivot=final_accuracy with=b,c -->\n| old |\n")
    script = _script()
    script.SPECS = specs
    args = ["--page", str(page), "--runs", str(runs)]
    assert script.main(args) == 1  # written; not complete
    lines = page.read_text().splitlines()
    assert lines[1] == "| algorithm | label-skew-1 | concept-shift | feature-skew |"
    oracle, fedavg = (script.cells(line) for line in lines[3:5])
    assert oracle[0] == "oracle" and oracle[3] == "-" and "[" not in oracle[1] + oracle[2]
    assert fedavg[0] == "fedavg" and fedavg[2].endswith("[1 of 2 runs]") and fedavg[3] == "-"
    # the one finished fedavg seed of b is that run's own accuracy
    summary = json.loads((runs / "b" / "seed0" / "fedavg" / "summary.json").read_text())
    assert fedavg[2] == f"{summary['final_accuracy'] * 100:.1f} [1 of 2 runs]"
    assert not (runs / "b" / "results.csv").exists() and not (runs / "c").exists()  # read only


def test_a_with_name_that_is_a_path_is_refused(tmp_path):
    import pytest

    page = tmp_path / "paper.md"
    script = _script()
    for bad in ("..", "../etc", ".hidden"):
        page.write_text(f"<!-- sweep: a pivot=final_accuracy with=b,{bad} -->\n| old |\n")
        with pytest.raises(SystemExit, match="is not a sweep's name"):
            script.main(["--page", str(page), "--runs", str(tmp_path)])
