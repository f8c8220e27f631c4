# The two commands a new machine needs: `make run` (the main job) and `make test`.
.PHONY: setup run test bench lint

setup:
	scripts/bootstrap.sh

run: setup
	.venv/bin/slotrelay run examples/phase2/node_chain.json

test: setup
	.venv/bin/python -m pytest

bench: setup
	for f in bench/*.py; do .venv/bin/python $$f || exit 1; done

lint: setup
	.venv/bin/ruff check .
	.venv/bin/lint-imports
