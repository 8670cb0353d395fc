#!/usr/bin/env bash
# postgres.sh: a throwaway PostgreSQL server for the tests that run on PostgreSQL.
#
#   scripts/postgres.sh run CMD [ARG...]
#       Runs CMD with AGENTD_TEST_POSTGRES_DSN pointing at a server: the one
#       that variable already names, if set (then nothing is started), else
#       a throwaway server started here and stopped when CMD ends, whether it
#       passes, fails or is interrupted. Exits with CMD's status.
#   eval "$(scripts/postgres.sh start)"
#       Starts a throwaway server and prints the shell lines that export
#       AGENTD_TEST_POSTGRES_DSN and AGENTD_TEST_POSTGRES_DIR (by hand: the
#       caller stops it).
#   scripts/postgres.sh stop [DIR]
#       Stops the server started in DIR (default $AGENTD_TEST_POSTGRES_DIR)
#       and removes DIR.
#
# The server: Debian's postgresql (installed when missing, as root), found on
# PATH or in /usr/lib/postgresql/*/bin; initdb into a temporary directory as
# an unprivileged user (initdb refuses root: as root, the system user
# agentd-test, created when missing, else nobody); TCP on 127.0.0.1 only, on
# a free port; its unix socket in that directory; trust authentication (the
# only clients are this machine's tests); fsync off (nothing in it outlives
# the run). The superuser is postgres, the database postgres.
set -euo pipefail

log() { echo "postgres.sh: $*" >&2; }

# bin NAME: the PostgreSQL program NAME, on PATH or in the newest
# /usr/lib/postgresql/*/bin.
bin() {
  local found
  if found=$(command -v "$1" 2>/dev/null); then
    echo "$found"
    return 0
  fi
  found=$(ls -d /usr/lib/postgresql/*/bin/"$1" 2>/dev/null | sort -V | tail -n 1)
  [[ -n "$found" ]] && echo "$found"
}

# install: Debian's postgresql, when its programs are missing. A policy-rc.d
# keeps the package from starting the cluster it creates: the tests use
# their own server.
install() {
  if bin initdb >/dev/null && bin pg_ctl >/dev/null && bin postgres >/dev/null; then
    return 0
  fi
  if [[ $(id -u) != 0 ]]; then
    log "PostgreSQL is not installed; install it (apt-get install postgresql) or set AGENTD_TEST_POSTGRES_DSN to a server"
    exit 1
  fi
  log "installing Debian's postgresql"
  local policy=/usr/sbin/policy-rc.d ours=
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && ours=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  local rc=0
  apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql >/dev/null || rc=$?
  if [[ -n $ours ]]; then rm -f "$policy"; fi
  if ((rc != 0)); then
    log "could not install postgresql"
    exit "$rc"
  fi
}

# as_user CMD...: runs CMD as the server's user, from / (the caller's
# directory may be closed to that user; every path given is absolute).
as_user() {
  if [[ $(id -u) == 0 ]]; then
    (cd / && runuser -u "$user" -- "$@")
  else
    "$@"
  fi
}

pick_user() {
  user=$(id -un)
  [[ $(id -u) == 0 ]] || return 0
  user=agentd-test
  if ! id "$user" >/dev/null 2>&1 &&
    ! useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user" 2>/dev/null; then
    user=nobody
  fi
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on now (the start
# retries if another process takes it meanwhile).
free_port() {
  local port
  for _ in $(seq 1 50); do
    port=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
  log "found no free port"
  return 1
}

# start: a server in a new temporary directory; sets dir and dsn.
start() {
  install
  pick_user
  local initdb pg_ctl began
  began=$(date +%s%N)
  initdb=$(bin initdb) pg_ctl=$(bin pg_ctl)
  # As root, /tmp: the server's user must reach the directory, and a
  # TMPDIR under /root it could not.
  local base=${TMPDIR:-/tmp}
  [[ $(id -u) == 0 ]] && base=/tmp
  dir=$(mktemp -d "$base/agentd-postgres.XXXXXX")
  chmod 0755 "$dir"
  [[ $(id -u) == 0 ]] && chown "$user" "$dir"
  if ! as_user "$initdb" -D "$dir/data" -U postgres --auth=trust --no-locale -E UTF8 --no-sync >"$dir/initdb.log" 2>&1; then
    log "initdb failed:"
    cat "$dir/initdb.log" >&2
    rm -rf "$dir"
    return 1
  fi
  local port
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    if as_user "$pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "-c listen_addresses=127.0.0.1 -p $port \
      -c unix_socket_directories=$dir -c max_connections=300 -c fsync=off -c synchronous_commit=off \
      -c full_page_writes=off" start >/dev/null; then
      dsn="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
      log "PostgreSQL $("$(bin postgres)" --version | awk '{print $3}') on 127.0.0.1:$port, in $dir, started in $((($(date +%s%N) - began) / 1000000)) ms"
      return 0
    fi
    if ! grep -q "could not bind\|Address already in use" "$dir/server.log" 2>/dev/null || ((attempt == 5)); then
      log "the server did not start:"
      cat "$dir/server.log" >&2 || true
      stop "$dir"
      return 1
    fi
    : >"$dir/server.log"
  done
}

# stop DIR: stops the server of DIR (at once: nothing in it is kept) and
# removes DIR.
stop() {
  local d=$1
  [[ -d $d ]] || return 0
  if [[ -f $d/data/postmaster.pid ]]; then
    local owner pid
    owner=$(stat -c %U "$d/data")
    if [[ $(id -u) == 0 ]]; then
      (cd / && runuser -u "$owner" -- "$(bin pg_ctl)" -D "$d/data" -m immediate -w -t 30 stop >/dev/null 2>&1) || true
    else
      "$(bin pg_ctl)" -D "$d/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    fi
    # A server pg_ctl could not stop is killed with all its processes.
    if [[ -f $d/data/postmaster.pid ]] && pid=$(head -n 1 "$d/data/postmaster.pid") && kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
      pkill -KILL -P "$pid" 2>/dev/null || true
    fi
  fi
  rm -rf "$d"
}

case ${1:-} in
run)
  shift
  (($# > 0)) || { log "usage: $0 run CMD [ARG...]"; exit 2; }
  if [[ -n ${AGENTD_TEST_POSTGRES_DSN:-} ]]; then
    exec "$@"
  fi
  start
  # The server goes when this script does: after CMD, on its failure, and
  # on an interrupt (which exits, running the EXIT trap).
  trap 'rc=$?; stop "$dir"; log "stopped"; exit $rc' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  export AGENTD_TEST_POSTGRES_DSN=$dsn
  "$@"
  ;;
start)
  start
  printf 'export AGENTD_TEST_POSTGRES_DSN=%q AGENTD_TEST_POSTGRES_DIR=%q\n' "$dsn" "$dir"
  ;;
stop)
  d=${2:-${AGENTD_TEST_POSTGRES_DIR:-}}
  [[ -n $d ]] || { log "usage: $0 stop DIR (or AGENTD_TEST_POSTGRES_DIR)"; exit 2; }
  stop "$d"
  ;;
*)
  echo "usage: $0 run CMD [ARG...] | start | stop [DIR]" >&2
  exit 2
  ;;
esac
