# shellcheck shell=bash
# Source this file (". .ci/pg.sh") to point the PostgreSQL store tests at a
# database: it exports MARKOV_TEST_POSTGRES, a URL of a database named "test"
# that the tests may create schemas in.
#
#  1. If MARKOV_TEST_POSTGRES is already set and answers, it is kept.
#  2. If a PostgreSQL server answers on 127.0.0.1:5432 (MARKOV_PG_CHECK_PORT)
#     and lets user postgres (or root) in without a password, it is used;
#     database "test" is created if missing — unless it allows fewer than
#     MARKOV_PG_MIN_CONNS (300) connections: the suite's packages run in
#     parallel, and the fleet's tests start worker processes with pools of
#     their own, more than a default server's 100 at peak.
#  3. Otherwise PostgreSQL is installed with apt-get if needed, and a
#     throwaway cluster is initialised in ${TMPDIR:-/tmp}/markov-pg-PORT (as
#     the postgres user when run as root) and started on 127.0.0.1 at the
#     first free port from 55432 (MARKOV_PG_PORT) with trust authentication,
#     MARKOV_PG_MIN_CONNS connections and its unix socket in that directory.
#     Sourcing again reuses it.
#
# It changes no shell options and defines nothing but the variable. It
# returns 0 when MARKOV_TEST_POSTGRES is set; on failure it says why on
# stderr and returns 1 with the variable unset, so ". .ci/pg.sh || true" lets
# the PostgreSQL tests skip instead of failing the run. Stop the throwaway
# cluster with: pg_ctl -D "${TMPDIR:-/tmp}/markov-pg-55432/data" stop

__markov_pg_log() { echo "pg.sh: $*" >&2; }

# __markov_pg_try URL: succeeds if URL answers a query.
__markov_pg_try() {
	command -v psql >/dev/null 2>&1 || return 1
	PGCONNECT_TIMEOUT=3 psql "$1" -Atqc 'select 1' >/dev/null 2>&1
}

# __markov_pg_export HOST PORT USER: uses database test there, creating it,
# when the server allows MARKOV_PG_MIN_CONNS connections.
__markov_pg_export() {
	local url="postgres://$3@$1:$2/test?sslmode=disable" conns
	if ! __markov_pg_try "$url"; then
		__markov_pg_try "postgres://$3@$1:$2/postgres?sslmode=disable" || return 1
		PGCONNECT_TIMEOUT=3 psql "postgres://$3@$1:$2/postgres?sslmode=disable" -qc 'CREATE DATABASE test' >/dev/null 2>&1
		__markov_pg_try "$url" || return 1
	fi
	conns="$(PGCONNECT_TIMEOUT=3 psql "$url" -Atqc 'show max_connections' 2>/dev/null)"
	if [ "${conns:-0}" -lt "${MARKOV_PG_MIN_CONNS:-300}" ]; then
		__markov_pg_log "$1:$2 allows $conns connections, fewer than ${MARKOV_PG_MIN_CONNS:-300}"
		return 1
	fi
	export MARKOV_TEST_POSTGRES="$url"
	__markov_pg_log "using $url"
}

# __markov_pg_as_owner CMD...: runs CMD as the postgres user when root.
__markov_pg_as_owner() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

__markov_pg_bindir() {
	local d
	if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir 2>/dev/null)/initdb" ]; then
		pg_config --bindir
		return 0
	fi
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

__markov_pg_main() {
	local check_port="${MARKOV_PG_CHECK_PORT:-5432}"
	local port="${MARKOV_PG_PORT:-55432}"
	local user bindir base dir

	if [ -n "${MARKOV_TEST_POSTGRES:-}" ] && __markov_pg_try "$MARKOV_TEST_POSTGRES"; then
		__markov_pg_log "using MARKOV_TEST_POSTGRES as set"
		return 0
	fi
	unset MARKOV_TEST_POSTGRES

	# A server that is already there.
	if command -v pg_isready >/dev/null 2>&1 && pg_isready -q -h 127.0.0.1 -p "$check_port" -t 3; then
		for user in postgres root; do
			__markov_pg_export 127.0.0.1 "$check_port" "$user" && return 0
		done
		__markov_pg_log "a server answers on 127.0.0.1:$check_port but lets neither postgres nor root in, or allows too few connections; starting our own"
	fi

	# Our own throwaway cluster.
	if ! bindir="$(__markov_pg_bindir)" || ! command -v psql >/dev/null 2>&1; then
		if [ "$(id -u)" != 0 ]; then
			__markov_pg_log "PostgreSQL is not installed and we are not root to install it"
			return 1
		fi
		__markov_pg_log "installing PostgreSQL"
		if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } >/dev/null 2>&1; then
			__markov_pg_log "apt-get install postgresql failed"
			return 1
		fi
		if ! bindir="$(__markov_pg_bindir)"; then
			__markov_pg_log "no initdb after installing PostgreSQL"
			return 1
		fi
	fi

	base="${TMPDIR:-/tmp}"
	for port in $(seq "$port" $((port + 20))); do
		dir="$base/markov-pg-$port"
		# Ours and running: reuse it.
		if [ -f "$dir/data/postmaster.pid" ] && __markov_pg_as_owner "$bindir/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
			__markov_pg_export 127.0.0.1 "$port" postgres && return 0
		fi
		# Someone else's port: try the next one.
		if pg_isready -q -h 127.0.0.1 -p "$port" -t 1 || (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			continue
		fi
		if [ ! -f "$dir/data/PG_VERSION" ]; then
			rm -rf "$dir"
			mkdir -p "$dir" || return 1
			[ "$(id -u)" = 0 ] && chown postgres: "$dir"
			if ! __markov_pg_as_owner "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C >"$dir/initdb.log" 2>&1; then
				__markov_pg_log "initdb failed: $(tail -5 "$dir/initdb.log")"
				return 1
			fi
		fi
		rm -f "$dir/data/postmaster.pid" # stale: the server is not running
		if ! __markov_pg_as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
			-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=${MARKOV_PG_MIN_CONNS:-300}" start >/dev/null 2>&1; then
			__markov_pg_log "could not start PostgreSQL on port $port: $(tail -5 "$dir/server.log" 2>/dev/null)"
			continue
		fi
		__markov_pg_export 127.0.0.1 "$port" postgres && return 0
		__markov_pg_log "started PostgreSQL on port $port but cannot use it"
		return 1
	done
	__markov_pg_log "no free port from ${MARKOV_PG_PORT:-55432}"
	return 1
}

# Called as a condition so that a caller's "set -e" does not end the shell
# on a probe that is expected to fail.
if __markov_pg_main; then
	__markov_pg_status=0
else
	__markov_pg_status=$?
fi
unset -f __markov_pg_log __markov_pg_try __markov_pg_export __markov_pg_as_owner __markov_pg_bindir __markov_pg_main
if [ "$__markov_pg_status" != 0 ]; then
	unset MARKOV_TEST_POSTGRES
	unset __markov_pg_status
	return 1 2>/dev/null || exit 1
fi
unset __markov_pg_status
return 0 2>/dev/null || true
