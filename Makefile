# The two commands a new user needs are `make demo` and `make test`; the rest are conveniences.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench-relay infra-up infra-down install clean

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

bench-relay: $(STAMP)
	$(BIN)/python -m bench.relay

infra-up: $(STAMP)
	$(BIN)/intentledger infra up

infra-down: $(STAMP)
	$(BIN)/intentledger infra down

clean:
	-$(BIN)/intentledger infra down
	rm -rf $(VENV) .intentledger *.egg-info
