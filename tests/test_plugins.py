"""Plugins through entry points: the worked example of docs/ installed with pip appears in the CLI, a sweep and
the dashboard's pages; broken plugins are reported by name and left out, never stopping a command or a page.

Each check runs in a fresh Python (a subprocess) whose path holds the installed plugin, so the registries of
this test process never see it (other tests count the built-ins)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "sticky-ifca"
TINY = ["--clusters", "2", "--clients-per-cluster", "3", "--samples-per-client", "30", "--local-epochs", "1"]


def python(args: list[str], site: Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "1000", "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
           "CFL_RUNS_DIR": str(cwd / "runs")}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def example_site(tmp_path_factory) -> Path:
    """The docs' example package, installed by pip (from a copy: pip builds in the source folder)."""
    work = tmp_path_factory.mktemp("plugin")
    source = work / "sticky-ifca"
    shutil.copytree(EXAMPLE, source)
    site = work / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                           "--quiet", "--target", str(site), str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (site / "sticky_ifca.py").is_file() and list(site.glob("cfl_lab_sticky_ifca-*.dist-info"))
    return site


def test_the_example_plugin_runs_from_the_command_line_and_in_a_sweep(example_site, tmp_path):
    listed = python(["-m", "cfl_core", "plugins"], example_site, tmp_path)
    assert listed.returncode == 0 and "ifca-sticky" in listed.stdout and "cfl-lab-sticky-ifca" in listed.stdout
    helped = python(["-m", "cfl_core", "run", "--help"], example_site, tmp_path)
    assert "ifca-sticky" in helped.stdout  # a choice of --algorithm
    bad = python(["-m", "cfl_core", "run", "--algorithm", "ifca-sticky", "--models", "2", "--option", "margin=2",
                  "--out", "bad", *TINY], example_site, tmp_path)
    assert bad.returncode == 2 and "options.margin=2" in bad.stderr and "Traceback" not in bad.stderr
    done = python(["-m", "cfl_core", "run", "--algorithm", "ifca-sticky", "--models", "2", "--rounds", "3",
                   "--option", "margin=0.2", "--out", "run", *TINY], example_site, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in (tmp_path / "run" / "rounds.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and all("stayed" in line["extras"] for line in lines)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["options"] == {"margin": 0.2}
    # a sweep's worker processes find it too (the local pool starts fresh interpreters)
    (tmp_path / "spec.yaml").write_text(textwrap.dedent("""\
        base: {dataset: digits, rounds: 2, clusters: 2, clients_per_cluster: 3, samples_per_client: 30,
               local_epochs: 1, models: 2}
        grid:
          algorithm: [ifca-sticky, ifca]
        folder: "{algorithm}"
        """))
    swept = python(["-m", "cfl_core", "sweep", "spec.yaml", "--out", "sweep", "--workers", "2"], example_site, tmp_path)
    assert swept.returncode == 0, swept.stderr[-2000:]
    assert (tmp_path / "sweep" / "ifca-sticky" / "summary.json").is_file()
    assert "ifca-sticky" in (tmp_path / "sweep" / "results.csv").read_text()


PAGES = """
import sys
from streamlit.testing.v1 import AppTest
from cfl_ui.form.panel import section_key
at = AppTest.from_file(sys.argv[1], default_timeout=120)
at.query_params.update({"algorithm": "ifca-sticky", "models": "2"})
at.run()
assert not at.exception, [e.value for e in at.exception]
assert at.selectbox(key="pg.algorithm").value == "ifca-sticky"
at.session_state[section_key("pg", "options.ifca-sticky")] = True
at.run()
assert not at.exception, [e.value for e in at.exception]
margin = at.number_input(key="pg.opt.ifca-sticky.margin")
assert margin.value == 0.05 and margin.label == "Switching margin", (margin.value, margin.label)
at.query_params.clear()
at.switch_page("pages/compare.py").run()
assert not at.exception, [e.value for e in at.exception]
assert "ifca-sticky" in at.multiselect(key="cmp.algos").options or "IFCA (sticky)" in \
    at.multiselect(key="cmp.algos").options, at.multiselect(key="cmp.algos").options
print("PAGES OK")
"""


def test_the_example_plugin_shows_on_the_playground_and_in_compare(example_site, tmp_path):
    shown = python(["-c", PAGES, str(ROOT / "app.py")], example_site, tmp_path)
    assert "PAGES OK" in shown.stdout, (shown.stdout[-2000:], shown.stderr[-3000:])


BROKEN = {
    "cfl_lab.algorithms": {
        "explodes": "broken_plugins:Explodes",  # its module raises on import
        "not-a-class": "working_plugins:NOT_AN_ALGORITHM",
        "ifca": "working_plugins:Pretender",  # a built-in's name
        "abstract": "working_plugins:Abstract",  # no run_round
        "misnamed": "working_plugins:Pretender",  # its name is not the entry point's
    },
    "cfl_lab.datasets": {"half-source": "working_plugins:HALF_SOURCE", "tiny-blobs": "working_plugins:TINY_BLOBS"},
    "cfl_lab.partitions": {"lopsided": "working_plugins:LOPSIDED", "pairs": "working_plugins:PAIRS"},
}

WORKING = '''
import numpy as np, torch
from cfl_core import Algorithm, DataSource, Dataset, DatasetInfo
from cfl_core.partition import ClusterStructure

NOT_AN_ALGORITHM = 42

class Pretender(Algorithm):
    name = "ifca"
    label = "Not IFCA"
    def setup(self, clients):
        return {}
    def run_round(self, round_index, participants):
        raise RuntimeError

class Abstract(Algorithm):
    name = "abstract"
    label = "Abstract"
    def setup(self, clients):
        return {}

INFO = DatasetInfo("tiny-blobs", "classification", (4,), 3, 600, 300)

def _load(key, seed):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(3, 4, generator=g) * 3
    def pool(n):
        y = torch.arange(n) % 3
        return centres[y] + torch.randn(n, 4, generator=g), y
    x_train, y_train = pool(600)
    x_test, y_test = pool(300)
    return Dataset(INFO, x_train, y_train, x_test, y_test)

TINY_BLOBS = DataSource("tiny-blobs", "three Gaussian blobs in 4-D (a plugin's data set)", INFO, _load, seeded=True)
HALF_SOURCE = DataSource("half-source", "its info has another name", INFO, _load)

def _pairs(clusters, supply):
    w = np.zeros((clusters, len(supply)))
    for k in range(clusters):
        w[k, [(2 * k) % len(supply), (2 * k + 1) % len(supply)]] = 0.5
    return w

PAIRS = ClusterStructure("pairs", "cluster k holds the labels 2k and 2k+1", _pairs)
LOPSIDED = ClusterStructure("lopsided", "its weights do not sum to 1",
                            lambda clusters, supply: np.ones((clusters, len(supply))))
'''


def write_dist_info(site: Path, groups: dict) -> None:
    """An installed distribution as pip leaves one: METADATA and entry_points.txt in a .dist-info folder."""
    info = site / "cfl_lab_test_plugins-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cfl-lab-test-plugins\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in entries.items()) + "\n"
        for group, entries in groups.items()))


def test_broken_plugins_are_reported_by_name_and_left_out_and_the_working_ones_run(tmp_path):
    site = tmp_path / "site"
    write_dist_info(site, BROKEN)
    (site / "broken_plugins.py").write_text("raise ImportError('this plugin needs a package that is missing')\n")
    (site / "working_plugins.py").write_text(WORKING)
    listed = python(["-m", "cfl_core", "plugins"], site, tmp_path)
    assert listed.returncode == 1, listed.stderr[-2000:]
    left_out = {line.split()[1]: line for line in listed.stdout.splitlines() if "LEFT OUT" in line}
    assert set(left_out) == {"explodes", "not-a-class", "ifca", "abstract", "misnamed", "half-source", "lopsided"}
    assert "could not be imported (ImportError: this plugin needs a package that is missing)" in left_out["explodes"]
    assert "already taken by a built-in" in left_out["ifca"]
    assert "does not implement run_round" in left_out["abstract"]
    assert "each row summing to 1" in left_out["lopsided"]
    registered = {line.split()[1] for line in listed.stdout.splitlines() if "LEFT OUT" not in line}
    assert registered == {"tiny-blobs", "pairs"}
    # a command still works, and says once which plugins it left out
    done = python(["-m", "cfl_core", "run", "--dataset", "tiny-blobs", "--partition", "pairs", "--algorithm", "ifca",
                   "--models", "2", "--rounds", "2", "--out", "run", *TINY], site, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.count("was left out") == 7 and "plugin 'explodes'" in done.stderr
    partition = json.loads((tmp_path / "run" / "partition.json").read_text())
    labels = [{i for i, n in enumerate(c["label_counts"]) if n} for c in partition["clients"]]
    assert labels == [{0, 1}] * 3 + [{0, 2}] * 3  # the plugin's structure: cluster k holds labels 2k, 2k+1 mod 3
    # the dashboard draws every page, with the plugins left out named in the sidebar
    page = python(["-c", "import sys\nfrom streamlit.testing.v1 import AppTest\n"
                         "at = AppTest.from_file(sys.argv[1], default_timeout=120)\nat.run()\n"
                         "assert not at.exception, [e.value for e in at.exception]\n"
                         "print('WARNINGS', sum('was left out' in w.value for w in at.sidebar.warning))\n"
                         "print('DATASETS', 'tiny-blobs' in at.selectbox(key='pg.dataset').options)\n"
                         "print('PARTITIONS', 'pairs' in at.selectbox(key='pg.partition').options)\n",
                   str(ROOT / "app.py")], site, tmp_path)
    assert "WARNINGS 7" in page.stdout, (page.stdout[-1000:], page.stderr[-3000:])
    assert "DATASETS True" in page.stdout and "PARTITIONS True" in page.stdout, page.stdout[-1000:]


def test_the_contract_tests_run_over_the_installed_plugin(example_site, tmp_path):
    """The contract suite parametrizes over the registry, so an installed plugin is checked like a built-in: same
    records for the same seed, identical resumes after a stop or a SIGKILL, options through the CLI and a file."""
    done = python(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
                   str(ROOT / "tests" / "test_algorithm_contract.py"), "-k", "ifca-sticky"], example_site, tmp_path,
                  timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed and int(passed.group(1)) >= 5 and "failed" not in done.stdout and "skipped" not in done.stdout
