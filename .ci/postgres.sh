# Sourced (not run): a throwaway PostgreSQL cluster for the results store's tests
# (tests/test_store_pg.py), as a user starts one with pg_ctl. Debian's package is installed if
# missing; the cluster lives in a temp dir owned by the postgres user (initdb refuses root) and
# listens on a free loopback port. Exports SPECPERF_TEST_PG_URL; `pg_stop` stops it.
#   . .ci/postgres.sh && pg_start && ...tests... ; pg_stop

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

pg_start() {
  if [ -z "$(pg_bin)" ]; then
    local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
      postgresql >/dev/null || { echo "apt-get install postgresql failed." >&2; return 1; }
  fi
  local bin; bin=$(pg_bin)
  PG_DIR=$(mktemp -d /tmp/specperf-pg.XXXXXX)  # /tmp: the postgres user must reach it
  chown postgres "$PG_DIR" && chmod 700 "$PG_DIR"
  local port; port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local as=(runuser -u postgres --)
  "${as[@]}" "$bin/initdb" -D "$PG_DIR/data" -A trust -U postgres >"$PG_DIR/initdb.log" 2>&1 \
    || { cat "$PG_DIR/initdb.log" >&2; return 1; }
  "${as[@]}" "$bin/pg_ctl" -D "$PG_DIR/data" -o "-p $port -k $PG_DIR -c listen_addresses=127.0.0.1" \
    -l "$PG_DIR/log" -w start >/dev/null || { cat "$PG_DIR/log" >&2; return 1; }
  export SPECPERF_TEST_PG_URL="postgresql://postgres@127.0.0.1:$port/postgres"
  echo "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') at $SPECPERF_TEST_PG_URL ($PG_DIR)"
}

pg_stop() {
  [ -n "${PG_DIR:-}" ] || return 0
  runuser -u postgres -- "$(pg_bin)/pg_ctl" -D "$PG_DIR/data" -m immediate stop >/dev/null 2>&1
  rm -rf "$PG_DIR"; PG_DIR=""
}
