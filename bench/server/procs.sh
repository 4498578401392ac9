#!/usr/bin/env bash
# MANY-PROCESS server benchmark: the uistream project as it is deployed on several cores, N uvicorn
# worker processes on one port (`uvicorn --workers N`), PostgreSQL and the Redis broker, under a
# closed-loop load (C clients, each running "count to N" chats back to back for DURATION seconds).
# Per configuration and N: streams per second, gap p99, and streams/s(N) / (N x streams/s(1)).
# README.md here ("Many processes").
#
#   bench/server/procs.sh                      # N = 1 .. nproc, both configurations, table
#   PROCS="1 2" CONFIGS=inprocess bench/server/procs.sh
#   C=32 COUNT=20 DELAY_MS=5 DURATION=20 MEASURE_FROM=4   # the load (defaults shown)
#   CELERY_THREADS=32                          # the thread pool of each Celery worker (default: C)
#   PG=postgres://postgres@127.0.0.1:5432      # the PostgreSQL server (a fresh database per run, dropped after)
#   REDIS_URL=redis://127.0.0.1:6379/0         # the broker (keys under a prefix of the run's own, deleted after)
#   UISTREAM_DIR / UISTREAM_REPO / UISTREAM_PY / SRVBENCH_WORK / RESULTS / PORT=8995: as in run_servers.sh
#   KEEP_DBS=1                                 # keep each run's database (srvbench_<pid>_<config>_<n>)
#
# Configurations (CONFIGS):
#   inprocess  N uvicorn workers; every run executes in the web process that took its request
#   celery     the same N web processes handing every run to Celery (UISTREAM["EXECUTOR"] = "celery"),
#              N `celery -A demo_project worker --pool threads -c CELERY_THREADS` processes beside them
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$(readlink -f "$0")")/lib.sh"

NPROC=$(nproc)
PROCS=${PROCS:-$(seq -s ' ' 1 "$NPROC")}
CONFIGS=${CONFIGS:-"inprocess celery"}
C=${C:-32}
COUNT=${COUNT:-20}
DELAY_MS=${DELAY_MS:-5}
DURATION=${DURATION:-20}
MEASURE_FROM=${MEASURE_FROM:-4}
WARMUP=${WARMUP:-10}
CELERY_THREADS=${CELERY_THREADS:-$C}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
PORT=${PORT:-8995}
RESULTS=${RESULTS:-$HERE/results-procs}
TAG=srvbench_$$

psql_admin() { psql "$PG/postgres" -v ON_ERROR_STOP=1 -qAtc "$1" >/dev/null; }

forget_redis() {  # $1: the key prefix of a run
  "$UISTREAM_PY" - "$REDIS_URL" "$1" <<'EOF'
import sys
import redis
client = redis.Redis.from_url(sys.argv[1])
keys = list(client.scan_iter(match=f"{sys.argv[2]}:*", count=1000))
if keys:
    client.delete(*keys)
EOF
}

PIDS=()
stop_all() {
  local p i
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for i in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  PIDS=()
}
cleanup() {
  stop_all
  if [ "${KEEP_DBS:-0}" != 1 ] && [ -n "${TEMPLATE_MADE:-}" ]; then
    psql_admin "DROP DATABASE IF EXISTS ${TAG}_tpl WITH (FORCE)" || true
  fi
}
trap cleanup EXIT

# ---- set-up ---------------------------------------------------------------------------------------
LOAD_PY=$(pick_load_py) || { echo "need python >= 3.11 for load.py (LOAD_PY=...)" >&2; exit 1; }
setup_uistream
if (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; then echo "port $PORT is already in use" >&2; exit 1; fi
psql_admin "select 1" || { echo "no PostgreSQL at $PG (trust auth expected)" >&2; exit 1; }
"$UISTREAM_PY" -c "import redis, sys; redis.Redis.from_url(sys.argv[1]).ping()" "$REDIS_URL" \
  || { echo "no Redis at $REDIS_URL" >&2; exit 1; }
# One migrated template; every run gets a fresh database copied from it (CREATE DATABASE ... TEMPLATE:
# a file copy, seconds faster than migrating each).
log "migrating the template database ${TAG}_tpl"
psql_admin "CREATE DATABASE ${TAG}_tpl"
TEMPLATE_MADE=1
(cd "$UISTREAM_DIR" && env "${UENV[@]}" UISTREAM_BENCH_DIR="$WORK" UISTREAM_BENCH_DATABASE_URL="$PG/${TAG}_tpl" \
  "$UISTREAM_PY" manage.py migrate --noinput -v 0)
rm -rf "$RESULTS" && mkdir -p "$RESULTS/logs"
RESULTS=$(cd "$RESULTS" && pwd)
uistream_versions
{ echo "date: $(date -u +%FT%TZ)"; echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $NPROC cpus";
  echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"; echo "load client: $($LOAD_PY -V 2>&1)";
  echo "served: $SB_UREV; Python $SB_UPY, Django $SB_DJANGO, uvicorn $SB_UVICORN (h11, asyncio loop)";
  echo "PostgreSQL: $(psql "$PG/postgres" -qAtc 'show server_version'); Redis: $REDIS_URL";
  echo "PROCS=$PROCS CONFIGS=$CONFIGS C=$C COUNT=$COUNT DELAY_MS=$DELAY_MS DURATION=$DURATION" \
       "MEASURE_FROM=$MEASURE_FROM WARMUP=$WARMUP CELERY_THREADS=$CELERY_THREADS"; } > "$RESULTS/machine.txt"
cat "$RESULTS/machine.txt" >&2

# ---- runs -----------------------------------------------------------------------------------------
for config in $CONFIGS; do
  for n in $PROCS; do
    name=$config.n$n
    db=${TAG}_${config}_$n
    prefix=srvbench:$$:$config:$n
    log "$config, $n web process(es)"
    psql_admin "CREATE DATABASE $db TEMPLATE ${TAG}_tpl"
    env_run=("${UENV[@]}" "UISTREAM_BENCH_DIR=$WORK" "UISTREAM_BENCH_DATABASE_URL=$PG/$db"
      "UISTREAM_BENCH_REDIS_URL=$REDIS_URL" "UISTREAM_BENCH_REDIS_PREFIX=$prefix")
    if [ "$config" = celery ]; then
      # UISTREAM_DEMO_EXECUTOR: the demo package loads its Celery app with Django (the web processes send
      # the tasks through it); bench_settings points Celery at the same Redis, under the run's prefix.
      env_run+=("UISTREAM_BENCH_EXECUTOR=celery" "UISTREAM_DEMO_EXECUTOR=celery")
    fi
    (cd "$UISTREAM_DIR" && exec env "${env_run[@]}" "$UISTREAM_PY" -m uvicorn --host "$HOST" --port "$PORT" \
      --workers "$n" --no-access-log --log-level warning --loop asyncio --http h11 demo_project.asgi:application \
      >"$RESULTS/logs/$name.web.log" 2>&1) &
    web=$!
    PIDS=("$web")
    pid_args=(--pid "$web")
    if [ "$config" = celery ]; then
      for i in $(seq 1 "$n"); do
        (cd "$UISTREAM_DIR" && exec env "${env_run[@]}" "$UISTREAM_PY" -m celery -A demo_project worker \
          --loglevel=warning --pool threads -c "$CELERY_THREADS" --without-gossip --without-mingle \
          --without-heartbeat -n "srvbench-$$-$n-$i@%h" >"$RESULTS/logs/$name.worker$i.log" 2>&1) &
        PIDS+=("$!")
        pid_args+=(--pid "$!")
      done
    fi
    deadline=$((SECONDS + 60))
    until curl -sf -o /dev/null --max-time 2 "http://$HOST:$PORT/api/csrf"; do
      if ! kill -0 "$web" 2>/dev/null || [ $SECONDS -gt $deadline ]; then
        echo "the server did not start; its log:" >&2; tail -30 "$RESULTS/logs/$name.web.log" >&2; exit 1
      fi
      sleep 0.2
    done
    rc=0
    "$LOAD_PY" "$HERE/load.py" --url "http://$HOST:$PORT/api/chat" --csrf /api/csrf "${pid_args[@]}" \
      -c "$C" -n "$COUNT" --delay-ms "$DELAY_MS" --warmup "$WARMUP" --duration "$DURATION" \
      --measure-from "$MEASURE_FROM" --procs "$n" --label "$config" --json "$RESULTS/$name.json" || rc=$?
    sleep 0.5  # what follows the last [DONE] (storing the message) is stored before the servers stop
    stop_all
    if [ $rc -ne 0 ]; then log "  load.py exited $rc (failed streams are in the JSON)"; fi
    stored_check "$PG/$db" > "$RESULTS/$name.stored.json"
    log "  stored (warm-up included): $(cat "$RESULTS/$name.stored.json")"
    if [ "${KEEP_DBS:-0}" != 1 ]; then psql_admin "DROP DATABASE $db WITH (FORCE)"; fi
    forget_redis "$prefix"
  done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$RESULTS/machine.txt"

echo
"$LOAD_PY" "$HERE/load.py" --procs-report "$RESULTS" | tee "$RESULTS/table.md"
