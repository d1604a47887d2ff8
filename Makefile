# The two commands a new user needs are `make demo` and `make test`; the rest are conveniences.
# Each installs what it needs on first use: the system packages (scripts/system-packages: as
# root on Debian it installs them, elsewhere it prints the apt-get line) and a virtualenv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test unit lint bench bench-quick bench-dashboard bench-relay infra-up infra-down install clean

$(STAMP): pyproject.toml clients/python/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "intentledger needs Python >= 3.11")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e './clients/python[test]' -e '.[test,bench]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	scripts/system-packages demo
	$(BIN)/intentledger demo

test: $(STAMP)
	scripts/system-packages test
	PATH="$$PATH:$$(go env GOPATH 2>/dev/null)/bin" $(BIN)/python -m pytest -ra

# The tests that need no Kafka, PostgreSQL or browser (seconds, not minutes).
unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

lint: $(STAMP)
	$(BIN)/ruff check .

# The end-to-end benchmark (bench/e2e/): every service as a process, an open-loop ramp of
# proposals, correctness at the end; writes bench/results/e2e.json and PNG plots. Extra flags:
# make bench BENCH_ARGS="--rates 100,400 --step-seconds 30"; `make bench-quick` is a smoke.
BENCH_ARGS ?=
bench: $(STAMP)
	scripts/system-packages demo
	$(BIN)/python -m bench.e2e $(BENCH_ARGS)

bench-quick: $(STAMP)
	scripts/system-packages demo
	$(BIN)/python -m bench.e2e --quick $(BENCH_ARGS)

# The dashboard drawn from a real Prometheus's scrape of a short run.
bench-dashboard: $(STAMP)
	scripts/system-packages bench
	$(BIN)/python -m bench.dashboard

bench-relay: $(STAMP)
	scripts/system-packages demo
	$(BIN)/python -m bench.relay

infra-up: $(STAMP)
	scripts/system-packages demo
	$(BIN)/intentledger infra up

infra-down: $(STAMP)
	$(BIN)/intentledger infra down

clean:
	-$(BIN)/intentledger infra down
	rm -rf $(VENV) .intentledger *.egg-info
