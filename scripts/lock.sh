#!/usr/bin/env bash
# Writes constraints.txt: the version of every Python package `make setup` installs, resolved afresh from
# pyproject.toml's ranges in a throwaway virtual environment. Every setup (a user's, CI's) installs those
# versions, so a release of a dependency reaches the project only through this script: run it, then
# `make test`, and commit the two together.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q -e '.[dev]'
{
    echo "# The versions \`make setup\` installs (pip constraints), written by scripts/lock.sh on $(date -u +%F)"
    echo "# from pyproject.toml's ranges. Run that script to take new releases; do not edit by hand."
    "$venv/bin/pip" freeze --exclude-editable
} > constraints.txt.new
mv constraints.txt.new constraints.txt
printf '\033[1m[lock]\033[0m constraints.txt: %s packages\n' "$(grep -vc '^#' constraints.txt)"
