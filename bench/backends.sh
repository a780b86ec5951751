#!/usr/bin/env bash
# The Ray Serve backend against the local pool on this machine: same engine, same load, runs
# alternating local, ray, local, ray, ... (ROUNDS each), then one table of all of them.
#
#   bench/backends.sh                          # piper, wav, levels 1,2,4, 10 s each, 2 rounds
#   ENGINE=espeak ROUNDS=3 bench/backends.sh --levels 1,4
#
# Run from the repository root, with the `ray` and `bench` extras installed. Each server is
# started, benchmarked with `speechgate bench` (extra arguments go to it) and stopped; the Ray
# one starts its own local Ray instance on this machine's cores and stops it on exit.
set -euo pipefail

ENGINE=${ENGINE:-piper}
PORT=${PORT:-8124}
ROUNDS=${ROUNDS:-2}
BIN=${BIN:-.venv/bin}
OUT=${OUT:-${TMPDIR:-/tmp}/speechgate-bench/$(date +%Y%m%d-%H%M%S)-backends-$ENGINE}
mkdir -p "$OUT"
EXTRA=("$@")  # for `speechgate bench`
export SPEECHGATE_SERVER__PORT=$PORT SPEECHGATE_ENGINES=$ENGINE SPEECHGATE_DEFAULT_ENGINE=$ENGINE

SERVER_PID=
trap '[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; true' EXIT

run() {  # backend, round
  local backend=$1 name="$1-$2"
  SPEECHGATE_POOL__BACKEND=$backend "$BIN/speechgate" serve >"$OUT/$name.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 240); do
    curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null && break
    kill -0 "$SERVER_PID" || { cat "$OUT/$name.log"; exit 1; }
    sleep 0.5
  done
  "$BIN/speechgate" bench --url "http://127.0.0.1:$PORT" --model "$ENGINE" --format wav \
    --levels 1,2,4 --duration 10 --server-pid "$SERVER_PID" --json "$OUT/$name.json" "${EXTRA[@]}" \
    >"$OUT/$name.txt"
  kill "$SERVER_PID"
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
}

for round in $(seq "$ROUNDS"); do
  for backend in local ray; do
    echo "round $round: $backend" >&2
    run "$backend" "$round"
  done
done

"$BIN/python" - "$OUT" <<'PY'
import json, pathlib, sys

out = pathlib.Path(sys.argv[1])
runs = sorted(out.glob("*.json"), key=lambda p: (p.stem.split("-")[1], p.stem))
print("| run | conc | ok | 429 | errors | audio s/s | TTFA p50 / p99 ms | total p50 / p99 ms | CPU % |")
print("|---|---|---|---|---|---|---|---|---|")
for path in runs:
    for level in json.loads(path.read_text())["levels"]:
        ttfa, total = level["ttfa_ms"], level["latency_ms"]
        cpu = level["cpu_percent"]
        print(
            f"| {path.stem} | {level['concurrency']} | {level['completed']} | {level['rejected']}"
            f" | {sum(level['errors'].values())} | {level['throughput']:.1f}"
            f" | {ttfa['p50']:.0f} / {ttfa['p99']:.0f} | {total['p50']:.0f} / {total['p99']:.0f}"
            f" | {'-' if cpu is None else f'{cpu:.0f}'} |"
        )
PY
echo "results: $OUT" >&2
