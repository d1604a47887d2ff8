# The two commands a new user needs are `make demo` and `make test`; the rest are conveniences.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench bench-quick bench-relay infra-up infra-down install clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "intentledger needs Python >= 3.11")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/intentledger demo

test: $(STAMP)
	$(BIN)/python -m pytest -ra

# The end-to-end benchmark (bench/e2e/): every service as a process, an open-loop ramp of
# proposals, correctness at the end; writes bench/results/e2e.json and PNG plots. Extra flags:
# make bench BENCH_ARGS="--rates 100,400 --step-seconds 30"; `make bench-quick` is a smoke.
BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/python -m bench.e2e $(BENCH_ARGS)

bench-quick: $(STAMP)
	$(BIN)/python -m bench.e2e --quick $(BENCH_ARGS)

bench-relay: $(STAMP)
	$(BIN)/python -m bench.relay

infra-up: $(STAMP)
	$(BIN)/intentledger infra up

infra-down: $(STAMP)
	$(BIN)/intentledger infra down

clean:
	-$(BIN)/intentledger infra down
	rm -rf $(VENV) .intentledger *.egg-info
