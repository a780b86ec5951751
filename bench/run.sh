#!/usr/bin/env bash
# Start a speechgate server pinned to SERVER_CORES, benchmark it from BENCH_CORES, stop it.
#
#   bench/run.sh                                  # piper, wav, levels 1..32, 10 s each
#   ENGINE=espeak bench/run.sh --levels 1,2,4     # extra arguments go to `speechgate bench`
#
# Run from the repository root. The server's workers pin themselves inside SERVER_CORES
# (SPEECHGATE_POOL__CORES_PER_WORKER each); the in-process ceiling runs on the same cores.
set -euo pipefail

ENGINE=${ENGINE:-piper}
PORT=${PORT:-8123}
CORES=$(nproc)
# With 4+ cores, keep the load generator off the server's cores; with fewer, they share.
if (( CORES >= 4 )); then
  DEFAULT_SERVER="0-$(( CORES / 2 - 1 ))"
  DEFAULT_BENCH="$(( CORES / 2 ))-$(( CORES - 1 ))"
else
  DEFAULT_SERVER="0-$(( CORES - 1 ))"
  DEFAULT_BENCH=$DEFAULT_SERVER
fi
SERVER_CORES=${SERVER_CORES:-$DEFAULT_SERVER}
BENCH_CORES=${BENCH_CORES:-$DEFAULT_BENCH}
OUT=${OUT:-${TMPDIR:-/tmp}/speechgate-bench/$(date +%Y%m%d-%H%M%S)-$ENGINE}
BIN=${BIN:-.venv/bin}

mkdir -p "$OUT"
export SPEECHGATE_SERVER__PORT=$PORT SPEECHGATE_ENGINES=$ENGINE SPEECHGATE_DEFAULT_ENGINE=$ENGINE
taskset -c "$SERVER_CORES" "$BIN/speechgate" serve >"$OUT/server.log" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null || true' EXIT

for _ in $(seq 120); do
  curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null && break
  kill -0 "$SERVER_PID" || { cat "$OUT/server.log"; exit 1; }
  sleep 0.5
done

taskset -c "$BENCH_CORES" "$BIN/speechgate" bench \
  --url "http://127.0.0.1:$PORT" --model "$ENGINE" --format wav \
  --server-pid "$SERVER_PID" --in-process \
  --json "$OUT/results.json" --plot "$OUT/results.png" "$@" | tee "$OUT/table.txt"
