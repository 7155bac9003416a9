# dataseer — common tasks. `make run` and `make test` are the two README commands.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
Q ?= 星海远征上个月流水多少？
PORT ?= 8123

.PHONY: install run serve test test-dify lint format typecheck bench snapshots clean

$(BIN)/dataseer: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	@touch $@

install: $(BIN)/dataseer

run: install
	$(BIN)/dataseer ask "$(Q)"

serve: install
	$(BIN)/dataseer serve --port $(PORT) --dev-auth

test: install
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy
	$(BIN)/dataseer skills lint
	$(MAKE) test-dify
	$(BIN)/pytest -q

# The Dify plugin, in its own venv (integrations/dify_plugin/.venv), against a real server.
test-dify: install
	$(MAKE) -C integrations/dify_plugin test PY=$(PY)

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

format: install
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

snapshots: install
	UPDATE_SNAPSHOTS=1 $(BIN)/pytest -q tests/unit/test_prompt_snapshot.py

bench: install
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
