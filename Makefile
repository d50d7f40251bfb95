# blkreview: the two commands of the README are `make demo` and `make test`.
.PHONY: demo test test-s3 lint lock setup services bench fuzz clean help

PY := .venv/bin/python

help:
	@echo "make demo   - install, then run web + worker on the embedded default with demo data"
	@echo "make test   - install, start PostgreSQL/Redis if needed, run the whole test suite"
	@echo "make test-s3 - the services, API and e2e pipeline tests again on a SeaweedFS S3 bucket"
	@echo "make lint   - ruff, mypy (engine), import-linter (engine purity)"
	@echo "make bench  - the benchmarks (small sizes; see benchmarks/README.md)"
	@echo "make fuzz   - every parser with FUZZ_EXAMPLES (default 100000) hypothesis cases (hours)"
	@echo "make lock   - refresh requirements*.lock (hashes) from pyproject.toml"

setup:
	@scripts/setup.sh

# requirements-dev.lock (runtime + dev) and requirements.lock (runtime, what the Dockerfile
# installs), exact versions with sha256 hashes, from pyproject.toml. Pins already in a lock are
# kept (only new or changed requirements are resolved); `make lock UPGRADE=1` moves everything
# to the newest allowed versions. scripts/setup.sh reinstalls whenever a lock changes.
LOCK_FLAGS := --generate-hashes --universal --python-version 3.11 --quiet --custom-compile-command "make lock" $(if $(UPGRADE),--upgrade,)
lock:
	@test -x .venv/bin/uv || scripts/setup.sh
	.venv/bin/uv pip compile pyproject.toml --extra dev $(LOCK_FLAGS) -o requirements-dev.lock
	.venv/bin/uv pip compile pyproject.toml -c requirements-dev.lock $(LOCK_FLAGS) -o requirements.lock

services:
	@scripts/services.sh

demo:
	@WITH_DEV=0 scripts/setup.sh
	$(PY) manage.py migrate --noinput
	$(PY) manage.py load_demo
	$(PY) manage.py serve

test: setup services
	$(PY) -m pytest $(PYTEST_ARGS)

# the storage-heavy tests again with uploads and tables in a real SeaweedFS S3 bucket (the
# services, the API and the e2e pipeline; `pytest --storage=s3` runs any selection, the whole
# suite included, that way)
test-s3: setup services
	$(PY) -m pytest --storage=s3 -m "not browser" tests/web/services tests/web/api tests/e2e/test_pipeline.py $(PYTEST_ARGS)

lint: setup
	.venv/bin/ruff check .
	.venv/bin/mypy
	.venv/bin/lint-imports

# Opt-in deep fuzzing: FUZZ_EXAMPLES cases per parser (CI runs the tests' small counts).
FUZZ_EXAMPLES ?= 100000
fuzz: setup
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest tests/engine/traces/test_fuzz.py \
		tests/engine/traces/test_corruption.py -q -p no:cacheprovider \
		--hypothesis-show-statistics $(PYTEST_ARGS)

bench: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf var .pytest_cache .mypy_cache .ruff_cache
