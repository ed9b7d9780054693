"""scripts/seed_table.py: the README's reproduction tables (mean ± std over seeds)."""
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "seed_table.py"


def _load():
    spec = importlib.util.spec_from_file_location("seed_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mean_std_formats_and_skips_missing_values():
    seed_table = _load()
    assert seed_table.mean_std([0.5, 0.7], 100) == "60.00 ± 14.14"
    assert seed_table.mean_std([None, 0.25], 1, digits=3) == "0.250"
    assert seed_table.mean_std([None], 1) == "-"


def test_a_tiny_table_has_one_row_per_partition_and_algorithm(tmp_path):
    seed_table = _load()
    out = tmp_path / "table"
    assert seed_table.main([
        "--partitions", "feature-skew,iid", "--algorithms", "oracle,fedavg", "--seeds", "0,1", "--out", str(out),
        "--clusters", "2", "--clients-per-cluster", "2", "--samples-per-client", "20", "--rounds", "2",
    ]) == 0
    rows = [line for line in (out / "table.md").read_text().splitlines() if line.startswith("| ") and "---" not in line]
    header, body = rows[0], rows[1:]
    assert "final test loss" in header and "ARI = 1" in header
    assert [r.split(" | ")[:2] for r in body] == [
        ["| feature-skew", "oracle"], ["| feature-skew", "fedavg"], ["| iid", "oracle"], ["| iid", "fedavg"]]
    oracle = body[0].split(" | ")
    assert oracle[5] == "2/2"  # the oracle's assignment is the truth: ARI 1 in both seeds
    assert all(len(r.split(" | ")) == len(header.split(" | ")) for r in body)
    assert (out / "feature-skew" / "seed1").is_dir()  # every run kept in its folder


def test_algorithms_without_clusters_show_ari_as_not_applicable(tmp_path):
    seed_table = _load()
    out = tmp_path / "table"
    assert seed_table.main([
        "--partitions", "concept-shift", "--algorithms", "fedproto,fedavg", "--seeds", "0", "--out", str(out),
        "--clusters", "2", "--clients-per-cluster", "2", "--samples-per-client", "20", "--rounds", "2",
    ]) == 0
    rows = [line.split(" | ") for line in (out / "table.md").read_text().splitlines() if line.startswith("| c")]
    assert rows[0][1] == "fedproto" and rows[0][4:7] == ["n/a", "n/a", "n/a |"]
    assert rows[1][1] == "fedavg" and rows[1][4] == "0.00"  # one model for everyone: a score, and it is 0
