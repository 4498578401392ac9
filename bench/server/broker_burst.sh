#!/usr/bin/env bash
# C concurrent new chats (a burst) on TWO web processes (`uvicorn --workers 2`, one port) that share
# PostgreSQL, once with the Redis broker and once with the PostgreSQL broker (no Redis), alternately,
# in one run: time to first delta p50/p99, gap p99 (load.py), every answer stored (stored.py).
#
#   bench/server/broker_burst.sh                       # C=200, N=200 "count to N", 20 ms, 1 round
#   C=200 COUNT=200 DELAY_MS=20 ROUNDS=1 PG=postgres://postgres@127.0.0.1:5432 REDIS_URL=redis://127.0.0.1:6379/0 PORT=8996
#
# Each run gets a fresh database (dropped after) and the Redis broker a key prefix of its own (deleted
# after). Loopback only. The tree served is this checkout as it is; .venv/bin/python runs it.
set -euo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
HERE=$ROOT/bench/server
PY=${UISTREAM_PY:-$ROOT/.venv/bin/python}
C=${C:-200}; COUNT=${COUNT:-200}; DELAY_MS=${DELAY_MS:-20}; ROUNDS=${ROUNDS:-1}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
PORT=${PORT:-8996}
RESULTS=${RESULTS:-$HERE/results-broker-burst}
WORK=$(mktemp -d)
TAG=burst_$$
rm -rf "$RESULTS" && mkdir -p "$RESULTS/logs"
web=""
cleanup() { if [ -n "$web" ]; then kill "$web" 2>/dev/null || true; wait "$web" 2>/dev/null || true; fi; rm -rf "$WORK"; }
trap cleanup EXIT

for round in $(seq 1 "$ROUNDS"); do
  order="redis postgres"; if [ $((round % 2)) -eq 0 ]; then order="postgres redis"; fi
  for broker in $order; do
    db=${TAG}_${broker}_$round
    name=$broker.r$round
    psql "$PG/postgres" -qc "CREATE DATABASE $db"
    env_run=(PYTHONPATH="$ROOT:$ROOT/bench" DJANGO_SETTINGS_MODULE=bench_settings UISTREAM_BENCH_DIR="$WORK"
      UISTREAM_BENCH_DATABASE_URL="$PG/$db" UISTREAM_DEMO_DELAY_MS="$DELAY_MS" REDIS_URL=)
    if [ "$broker" = redis ]; then
      env_run+=(UISTREAM_BENCH_SETTINGS="{\"BROKER\": {\"BACKEND\": \"redis\", \"URL\": \"$REDIS_URL\",
        \"PREFIX\": \"burst:$$:$round\"}}")
    else
      env_run+=(UISTREAM_BENCH_SETTINGS='{"BROKER": {"BACKEND": "postgres"}}')
    fi
    (cd "$ROOT" && env "${env_run[@]}" "$PY" manage.py migrate --noinput -v 0)
    (cd "$ROOT" && exec env "${env_run[@]}" "$PY" -m uvicorn --host 127.0.0.1 --port "$PORT" --workers 2 \
      --no-access-log --log-level warning --loop asyncio --http h11 demo_project.asgi:application \
      >"$RESULTS/logs/$name.log" 2>&1) &
    web=$!
    until curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/api/csrf"; do
      kill -0 "$web" 2>/dev/null || { tail -30 "$RESULTS/logs/$name.log" >&2; exit 1; }
      sleep 0.2
    done
    "$PY" "$HERE/load.py" --url "http://127.0.0.1:$PORT/api/chat" --csrf /api/csrf --pid "$web" \
      -c "$C" -n "$COUNT" --delay-ms "$DELAY_MS" --label "$broker" --json "$RESULTS/$name.json" || true
    sleep 0.5  # what follows the last [DONE] is stored before the server stops
    kill "$web"; wait "$web" 2>/dev/null || true; web=""
    "$PY" "$HERE/stored.py" "$PG/$db" > "$RESULTS/$name.stored.json"
    echo "$name stored: $(cat "$RESULTS/$name.stored.json")"
    psql "$PG/postgres" -qc "DROP DATABASE $db WITH (FORCE)"
    if [ "$broker" = redis ]; then
      "$PY" - "$REDIS_URL" "burst:$$:$round" <<'PYEOF'
import sys, redis
client = redis.Redis.from_url(sys.argv[1])
keys = list(client.scan_iter(match=sys.argv[2] + ":*"))
if keys:
    client.delete(*keys)
PYEOF
    fi
  done
done
grep -h -A3 "^redis: \|^postgres: " "$RESULTS"/*.log 2>/dev/null || true
