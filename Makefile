# blkreview: the two commands of the README are `make demo` and `make test`.
.PHONY: demo test test-s3 lint setup services bench clean help

PY := .venv/bin/python

help:
	@echo "make demo   - install, then run web + worker on the embedded default with demo data"
	@echo "make test   - install, start PostgreSQL/Redis if needed, run the whole test suite"
	@echo "make test-s3 - the web and e2e pipeline tests again on a SeaweedFS S3 bucket"
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

# the web and end-to-end tests again with uploads and tables in a real SeaweedFS S3 bucket
test-s3: setup services
	$(PY) -m pytest --storage=s3 -m "not browser" tests/web tests/e2e/test_pipeline.py $(PYTEST_ARGS)

lint: setup
	.venv/bin/ruff check .
	.venv/bin/mypy
	.venv/bin/lint-imports

bench: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf var .pytest_cache .mypy_cache .ruff_cache
