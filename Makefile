# blkreview: the two commands of the README are `make demo` and `make test`.
.PHONY: demo test lint setup services bench clean help

PY := .venv/bin/python

help:
	@echo "make demo   - install, then run web + worker on the embedded default with demo data"
	@echo "make test   - install, start PostgreSQL/Redis if needed, run the whole test suite"
	@echo "make lint   - ruff, mypy (engine), import-linter (engine purity)"
	@echo "make bench  - the benchmarks (small sizes; see benchmarks/README.md)"

setup:
	@scripts/setup.sh

services:
	@scripts/services.sh

demo:
	@WITH_DEV=0 scripts/setup.sh
	$(PY) manage.py migrate --noinput
	$(PY) manage.py load_demo
	$(PY) manage.py serve

test: setup services
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	.venv/bin/ruff check .
	.venv/bin/mypy
	.venv/bin/lint-imports

bench: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf var .pytest_cache .mypy_cache .ruff_cache
