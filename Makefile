# Two commands do all set-up: `make run` (install + start the app) and
# `make test` (install + run every test). Both create .venv when it is missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8501

.PHONY: run test test-fast fuzz bench bench-peers tables install clean-venv chromium

# The x86_64 torch pin brings CUDA libraries: about 5.6 GB in $(VENV); the check says so before pip runs out of disk.
$(STAMP): requirements.txt requirements-test.txt
	$(PYTHON) scripts/need_disk.py $(VENV) 6.5
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -r requirements.txt -r requirements-test.txt
	$(PY) -m cfl_core.engine.native
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) -m cfl_ui.serve --server.port $(PORT)

# The browser tests drive Debian's chromium: installed here when missing (as root with apt-get), or one line
# says the command to run (scripts/need_chromium.sh).
chromium:
	@sh scripts/need_chromium.sh

test: $(STAMP) chromium
	$(PY) -m pytest -q

# The generated settings contract with many more examples than `make test` runs (random, not derandomised):
# FUZZ_EXAMPLES valid runs per algorithm (and 15x as many bad values per source); bounded by FUZZ_MINUTES.
FUZZ_EXAMPLES ?= 60
FUZZ_MINUTES ?= 60
fuzz: $(STAMP)
	CFL_CONTRACT_PROFILE=fuzz CFL_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) timeout $$(( $(FUZZ_MINUTES) * 60 )) \
		$(PY) -m pytest -q -p no:cacheprovider tests/test_contract_values.py tests/test_contract_runs.py \
		-k "generated or every_valid_combination"

# Everything but the slow end-to-end browser and behaviour tests.
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

bench: $(STAMP)
	$(PY) -m cfl_core bench --out benchmarks/RESULTS.md --json benchmarks/results.json

# The same FedAvg (and CLoVE) workload in CFL Lab, Flower and pfl-research (benchmarks/PEERS.md).
# The peers live in their own environment, .venv-peers (their pins may clash with the app's).
PEERS_VENV ?= .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed

$(PEERS_STAMP): requirements-peers.txt
	test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install -r requirements-peers.txt
	touch $(PEERS_STAMP)

# The quoted table (benchmarks/PEERS.md's top): CFL Lab against pfl-research at M = 100 and 1,000 and a CLoVE
# round at M = 1,000; 5 fresh-process repetitions per framework and setup, alternating; about 25 minutes on a
# quiet 2-core machine (a repetition stops after 45 s of rounds). On a busy machine it waits up to 5 minutes,
# then refuses to write further rows and exits 3. Flower (seconds to minutes a round): PEER_FRAMEWORKS=flower,pfl with
# fewer --rounds, run by hand (benchmarks/PEERS.md's notes).
PEER_FRAMEWORKS ?= pfl
bench-peers: $(STAMP) $(PEERS_STAMP)
	$(PY) -m cfl_core bench --peers $(PEER_FRAMEWORKS) --threads 2 --sizes 100,1000 --repetitions 5 --time-limit 600 \
		--peer-python $(PEERS_VENV)/bin/python --peer-profile --out benchmarks/PEERS.md --json benchmarks/peers.json

# The manual's results tables (docs/results.md): one sweep spec each (sweeps/NAME.yaml), run into runs/readme/NAME,
# then spliced into docs/results.md under its `<!-- sweep: NAME -->` marker(s). The Fashion-MNIST ones (the slowest) run last.
# A finished run is never run again: delete runs/readme/NAME to measure a table anew.
TABLES := digits-core digits-iid-unknown-k digits-unknown-k digits-same-init digits-init-modes digits-family \
	digits-swap-part digits-unsupervised algorithms-digits digits-newer-methods data-distance digits-dropout \
	digits-dp fmnist algorithms-fashion-mnist fashion-mnist-newer-methods

tables: $(STAMP)
	for name in $(TABLES); do $(PY) -m cfl_core sweep sweeps/$$name.yaml --out runs/readme/$$name || exit 1; done
	$(PY) scripts/readme_tables.py

# One table: `make table-digits-core` (any NAME of TABLES).
table-%: $(STAMP)
	$(PY) -m cfl_core sweep sweeps/$*.yaml --out runs/readme/$*
	$(PY) scripts/readme_tables.py $*

# The CLoVE paper's experiments at the paper's size (docs/clove-paper.md): the six row groups of a data set, 3 seeds
# each, into runs/clove-paper/NAME (NAME = the spec's); hours of CPU on a 2-core machine (the page gives the measured
# time), and resumable: stopped, the same command runs only what is not finished. Then the page's tables for that data
# set (Fashion-MNIST's are there) are spliced from the folders. MNIST and CIFAR-10: `make clove-paper-mnist` and
# `make clove-paper-cifar10` where their files are.
CLOVE_PAPER_STRUCTURES := label-skew-1 label-skew-2 label-skew-3 label-skew-4 feature-skew concept-shift

clove-paper-%: $(STAMP)
	for s in $(CLOVE_PAPER_STRUCTURES); do \
		nice -n 10 $(PY) -m cfl_core sweep sweeps/clove-paper-$*-$$s.yaml --out runs/clove-paper/clove-paper-$*-$$s \
		|| exit 1; done
	if grep -q "sweep: clove-paper-$*-label-skew-1 " docs/clove-paper.md; then \
		$(PY) scripts/readme_tables.py --page docs/clove-paper.md --runs runs/clove-paper clove-paper-$*-label-skew-1; fi

clean-venv:
	rm -rf $(VENV)
