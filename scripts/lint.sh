#!/usr/bin/env bash
# The checks that read the code without running it, before any test runs (`make lint`, the first step
# of `make test` and of CI): ruff, strict mypy, the import contract, and the documentation site's strict
# build with the reference pages the code generates. Each tool's settings are in pyproject.toml or
# mkdocs.yml; this script only runs them, in order of cost, and stops at the first that fails.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\033[1m[lint]\033[0m %s\n' "$*"; }

step "ruff check"
.venv/bin/ruff check --no-cache .
step "lint-imports"
.venv/bin/lint-imports
step "mypy"
# The cache lives beside the tree (.mypy_cache, git-ignored), so a second run checks only what changed.
.venv/bin/mypy
step "mkdocs build --strict"
# A broken link, a missing anchor, a page left out of the nav fail the build; the checks after it fail
# when the hook (docs/gen_reference.py) can no longer generate a reference page from the code.
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --quiet --strict --site-dir "$site"
has() {
    grep -qF -- "$2" "$site/$1/index.html" || { echo "the built site's $1 page lacks $2" >&2; exit 1; }
}
for page in getting-started chain-engine beyond benchmarks glossary; do
    [ -f "$site/$page/index.html" ] || { echo "the built site has no $page page" >&2; exit 1; }
done
has reference/cli "slotrelay psmr call"
has reference/cli "slotrelay sandbox doctor"
has reference/errors "MPP-E006"
has reference/errors "WORKSPACE_NOT_FOUND"
has reference/errors "identity_mismatch"
has reference/mcp-tools "psmr_semantic_diff"
has reference/chain-schema '"$defs"'
step "all clean"
