#!/usr/bin/env bash
# The server against Redis, in one run: redis-benchmark drives `urlseen serve --data D --fsync
# everysec` and a Redis 7 `redis-server` (appendonly everysec, the same durability) with the same
# clients, pipeline depths and random keys, and prints one CSV row per command and pipeline:
#
#   server,command,pipeline,requests_per_s,p50_ms,p99_ms
#
# Usage: scripts/server-bench.sh [requests per test (default 2000000)] [clients (default 50)]
# REDIS_AOF=no runs Redis without persistence instead (urlseen keeps --data, everysec).
# Needs redis-server and redis-benchmark (apt-get install redis-server) and a release build
# (cargo build --release -p urlseen). Ports are free ones; both servers are stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-2000000}
CLIENTS=${2:-50}
# URLSEEN_BIN: another build's binary (a before/after comparison runs two builds in turn).
BIN=${URLSEEN_BIN:-target/release/urlseen}
[[ -x $BIN ]] || { echo "build first: cargo build --release -p urlseen" >&2; exit 1; }
command -v redis-benchmark >/dev/null || { echo "redis-benchmark is missing (apt-get install redis-server)" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
WORK=$(mktemp -d)
cleanup() {
    [[ -n ${US_PID:-} ]] && kill "$US_PID" 2>/dev/null && wait "$US_PID" 2>/dev/null
    [[ -n ${RS_PID:-} ]] && kill "$RS_PID" 2>/dev/null && wait "$RS_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

US_PORT=$(free_port); HTTP_PORT=$(free_port); RS_PORT=$(free_port)
"$BIN" serve --resp "127.0.0.1:$US_PORT" --http "127.0.0.1:$HTTP_PORT" --data "$WORK/urlseen" \
    --fsync everysec >"$WORK/urlseen.log" 2>&1 &
US_PID=$!
redis-server --port "$RS_PORT" --bind 127.0.0.1 --save '' --appendonly "${REDIS_AOF:-yes}" \
    --appendfsync everysec --dir "$WORK" >"$WORK/redis.log" 2>&1 &
RS_PID=$!
for port in "$US_PORT" "$RS_PORT"; do
    for _ in $(seq 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
done

# One redis-benchmark test: prints "server,command,pipeline,rps,p50,p99".
bench() {
    local server=$1 port=$2 pipeline=$3 name=$4; shift 4
    local n=$N
    # Pipeline 1 is ~50x slower per request: fewer requests keep the run short.
    [[ $pipeline == 1 ]] && n=$((N / 10))
    redis-benchmark -p "$port" -c "$CLIENTS" -P "$pipeline" -n "$n" -r 100000000 --csv "$@" 2>/dev/null \
        | tail -1 | awk -F'"' -v s="$server" -v c="$name" -v p="$pipeline" \
            '{ printf "%s,%s,%s,%s,%s,%s\n", s, c, p, $4, $10, $14 }'
}

echo "server,command,pipeline,requests_per_s,p50_ms,p99_ms"
for pipeline in 64 1; do
    bench urlseen "$US_PORT" "$pipeline" URL.SEEN URL.SEEN jobs "https://example.com/__rand_int__"
    bench urlseen "$US_PORT" "$pipeline" BF.ADD BF.ADD bf "item:__rand_int__"
    bench urlseen "$US_PORT" "$pipeline" BF.EXISTS BF.EXISTS bf "item:__rand_int__"
    bench redis "$RS_PORT" "$pipeline" SADD SADD set "https://example.com/__rand_int__"
    bench redis "$RS_PORT" "$pipeline" SISMEMBER SISMEMBER set "https://example.com/__rand_int__"
done
echo "# BF.INFO bf: $(redis-cli -p "$US_PORT" BF.INFO bf | tr '\n' ' ')" >&2
