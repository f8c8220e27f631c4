#!/usr/bin/env bash
# Starts a Docker daemon when none answers. On machines without iptables or a bridge
# (containers, CI sandboxes) it runs with --iptables=false --bridge=none: sandboxes use
# --network none anyway. overlay2 first; vfs copies the whole image on every create.
set -euo pipefail
cd "$(dirname "$0")/.."

if docker info >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "[bootstrap] no Docker daemon answers and this user cannot start one: start dockerd, or set DOCKER_HOST" >&2
    exit 3
fi
mkdir -p .slotrelay
for driver in overlay2 vfs; do
    echo "[bootstrap] starting dockerd (storage driver $driver)"
    setsid nohup dockerd --iptables=false --ip6tables=false --bridge=none \
        --storage-driver="$driver" >".slotrelay/dockerd.log" 2>&1 </dev/null &
    pid=$!
    for _ in $(seq 1 60); do
        if docker info >/dev/null 2>&1; then
            echo "[bootstrap] dockerd is up (pid $pid, $driver)"
            exit 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
echo "[bootstrap] dockerd did not start; see .slotrelay/dockerd.log" >&2
exit 3
