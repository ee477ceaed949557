#!/usr/bin/env bash
# Many small namespaces in one server (issue 33's benchmark): N crawl jobs of 10 URLs each,
# created through `urlseen serve` in memory and with `--data --fsync everysec`, and the same
# load on Redis (one set per job: `SADD crawl:i:visited …`, in memory and with an everysec
# AOF). For each: the creation rate every N/10 namespaces, RSS per namespace and open
# descriptors as they grow (`urlseen bench namespaces`), peak RSS (`/usr/bin/time -v`), disk,
# and for the persistent runs the restart time (until the server answers) and a check that
# every URL is still seen after it; then plots of RSS and rate against the namespaces made.
#
#   scripts/namespaces.sh [N] [OUT_DIR]          # N defaults to 1000000
#   CONNECTIONS=1 scripts/namespaces.sh …        # connections per run (default 2)
#   RUNS=1 scripts/namespaces.sh …               # runs of each server and kind (default 5)
#
# Each kind of run (in memory, persistent) alternates urlseen and Redis RUNS times: a shared
# VM's speed drifts by a third within seconds, so flatness is judged on each tenth's median
# over the runs (printed at the end), not on one run.
#
# Needs redis-server and redis-cli (scripts/check.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-1000000}
OUT=${2:-$(mktemp -d -t urlseen-namespaces-XXXXXX)}
STEP=$((N / 10 > 0 ? N / 10 : 1))
# Connections each bench run uses (the same for every server): urlseen serves each on a thread
# of its own, Redis answers them all on one.
CONNECTIONS=${CONNECTIONS:-2}
RUNS=${RUNS:-5}
mkdir -p "$OUT"
# URLSEEN_BIN: another build to measure (default: the release build, made here).
BIN=${URLSEEN_BIN:-target/release/urlseen}
[[ -n ${URLSEEN_BIN:-} ]] || cargo build --release --quiet --bin urlseen
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pid_of_child() { # the server's pid: the child of /usr/bin/time
    local parent=$1 child=""
    for _ in $(seq 100); do
        child=$(pgrep -P "$parent" | head -1 || true)
        [[ -n $child ]] && break
        sleep 0.05
    done
    echo "$child"
}
wait_ready() { # seconds until PING answers PONG (not -LOADING)
    local port=$1 start
    start=$(date +%s.%N)
    until [[ $(redis-cli -p "$port" PING 2>/dev/null) == PONG ]]; do sleep 0.02; done
    awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'
}
peak() { awk -F: '/Maximum resident/ {gsub(/ /,"",$2); printf "%.1f MiB", $2/1024}' "$1"; }

run() { # name, server command…, then bench flags after --
    local name=$1; shift
    local cmd=() flags=()
    while [[ $1 != -- ]]; do cmd+=("$1"); shift; done
    shift; flags=("$@")
    local port; port=$(free_port)
    local timing="$OUT/$name.time"
    local args=("${cmd[@]//PORT/$port}")
    /usr/bin/time -v -o "$timing" "${args[@]}" >"$OUT/$name.log" 2>&1 &
    local wrapper=$!
    local pid; pid=$(pid_of_child $wrapper)
    wait_ready "$port" >/dev/null
    echo "== $name: ${args[*]}"
    "$BIN" bench namespaces --addr "127.0.0.1:$port" --server-pid "$pid" --namespaces "$N" \
        --step "$STEP" --connections "$CONNECTIONS" --json "${flags[@]}" | tee "$OUT/$name.jsonl"
    echo "$port" >"$OUT/$name.port"
    LAST_PORT=$port
    LAST_PID=$pid
    LAST_WRAPPER=$wrapper
    LAST_ARGS=("${args[@]}")
}
stop() { kill -TERM "$LAST_PID"; wait "$LAST_WRAPPER" || true; }
restart() { # name, bench flags…: restart the last server, time it, check every URL
    local name=$1; shift
    /usr/bin/time -v -o "$OUT/$name.time" "${LAST_ARGS[@]}" >"$OUT/$name.log" 2>&1 &
    LAST_WRAPPER=$!
    local t; t=$(wait_ready "$LAST_PORT")
    LAST_PID=$(pid_of_child $LAST_WRAPPER)
    echo "== $name: ready in ${t} s, $(ls /proc/"$LAST_PID"/fd | wc -l) fds"
    "$BIN" bench namespaces --addr "127.0.0.1:$LAST_PORT" --namespaces "$N" --check "$@" \
        | tail -1
}

tenths() { # name: each tenth's median rate over the runs NAME-1 … NAME-RUNS
    python3 - "$OUT" "$1" "$RUNS" <<'PY'
import json, statistics, sys
out, name, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
steps = [[json.loads(l) for l in open(f"{out}/{name}-{k}.jsonl") if '"per_second"' in l]
         for k in range(1, runs + 1)]
rates = [statistics.median(run[i]["per_second"] for run in steps) for i in range(len(steps[0]))]
print(f"{name}: each tenth's median over {runs} run(s), namespaces/s:",
      " ".join(f"{r:,.0f}" for r in rates),
      f"| slowest/fastest {min(rates) / max(rates):.2f}")
PY
}

for k in $(seq "$RUNS"); do
    run "urlseen-memory-$k" "$BIN" serve --resp 127.0.0.1:PORT --
    stop; echo "peak RSS $(peak "$OUT/urlseen-memory-$k.time")"
    run "redis-memory-$k" redis-server --port PORT --save "" --appendonly no -- --redis
    stop; echo "peak RSS $(peak "$OUT/redis-memory-$k.time")"
done

# The persistent runs alternate too, each in a fresh directory; the last of each is restarted
# and checked (the others' directories are removed, so that the disk holds one at a time).
for k in $(seq "$RUNS"); do
    DATA="$OUT/data-$k"
    run "urlseen-data-$k" "$BIN" serve --resp 127.0.0.1:PORT --data "$DATA" --fsync everysec --
    stop; echo "peak RSS $(peak "$OUT/urlseen-data-$k.time"), disk $(du -sh "$DATA" | cut -f1)"
    if [[ $k == "$RUNS" ]]; then
        restart urlseen-restart
        stop; echo "peak RSS after the restart and check $(peak "$OUT/urlseen-restart.time")"
    else
        rm -rf "$DATA"
    fi

    RDATA="$OUT/redis-data-$k"; mkdir -p "$RDATA"
    run "redis-aof-$k" redis-server --port PORT --save "" --appendonly yes --appendfsync everysec \
        --dir "$RDATA" -- --redis
    stop; echo "peak RSS $(peak "$OUT/redis-aof-$k.time"), disk $(du -sh "$RDATA" | cut -f1)"
    if [[ $k == "$RUNS" ]]; then
        restart redis-restart --redis
        stop
    else
        rm -rf "$RDATA"
    fi
done
tenths urlseen-memory
tenths redis-memory
tenths urlseen-data
tenths redis-aof
"$BIN" bench namespaces --plot "$OUT" --series "urlseen=$OUT/urlseen-memory-1.jsonl" \
    --series "urlseen --data=$OUT/urlseen-data-1.jsonl" --series "Redis SADD=$OUT/redis-memory-1.jsonl" \
    --series "Redis SADD, AOF=$OUT/redis-aof-1.jsonl"
echo "results and plots (namespaces-rss.svg, namespaces-rate.svg) in $OUT"
