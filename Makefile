# Two commands do all set-up: `make run` (install + start the app) and
# `make test` (install + run every test). Both create .venv when it is missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8501

.PHONY: run test test-fast bench bench-peers install clean-venv

$(STAMP): requirements.txt requirements-test.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -r requirements.txt -r requirements-test.txt
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) -m cfl_ui.serve --server.port $(PORT)

test: $(STAMP)
	$(PY) -m pytest -q

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

bench-peers: $(STAMP) $(PEERS_STAMP)
	$(PY) -m cfl_core bench --peers flower,pfl --threads 2 --sizes 10,100,1000,10000 --rounds 4 --time-limit 600 \
		--peer-python $(PEERS_VENV)/bin/python --peer-profile --out benchmarks/PEERS.md --json benchmarks/peers.json

clean-venv:
	rm -rf $(VENV)
