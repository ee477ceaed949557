#!/usr/bin/env bash
# Real clients against the real binary: starts `urlseen serve` on free loopback ports, runs the
# redis-py compatibility suite (tests/compat/test_redis_py.py), redis-cli and HTTP checks, then
# stops the server with SIGTERM during a load and checks that it exits 0.
#
#     scripts/redis-compat.sh                   # builds target/<profile>/urlseen (profile ci)
#     URLSEEN_BIN=path/to/urlseen scripts/redis-compat.sh
#
# Needs python3 (it installs redis-py with pip when missing). redis-cli and curl checks run when
# those are installed (apt-get install redis-tools curl).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }
fail() { printf 'redis-compat: %s\n' "$*" >&2; exit 1; }

command -v python3 >/dev/null || fail "python3 is needed (apt-get install python3 python3-pip)"
if ! python3 -c 'import redis' 2>/dev/null; then
    step "installing redis-py"
    python3 -m pip install --quiet redis || python3 -m pip install --quiet --break-system-packages redis
fi
python3 -c 'import redis' || fail "redis-py could not be installed"

if [[ -z "${URLSEEN_BIN:-}" ]]; then
    step "building urlseen (profile ci)"
    cargo build -p urlseen --profile ci
    URLSEEN_BIN="${CARGO_TARGET_DIR:-target}/ci/urlseen"
fi
[[ -x "$URLSEEN_BIN" ]] || fail "no urlseen binary at $URLSEEN_BIN"

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
RESP_PORT=$(free_port)
HTTP_PORT=$(free_port)
LOG=$(mktemp)
SERVER_PID=""
cleanup() {
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -f "$LOG"
}
trap cleanup EXIT

start_server() {
    "$URLSEEN_BIN" serve --resp "127.0.0.1:$RESP_PORT" --http "127.0.0.1:$HTTP_PORT" >"$LOG" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 100); do
        if python3 -c "import redis,sys; sys.exit(0 if redis.Redis(port=$RESP_PORT).ping() else 1)" 2>/dev/null; then
            return 0
        fi
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$LOG"; fail "urlseen serve exited"; }
        sleep 0.1
    done
    cat "$LOG"
    fail "urlseen serve did not answer PING on port $RESP_PORT"
}

step "urlseen serve on 127.0.0.1:$RESP_PORT (HTTP $HTTP_PORT)"
start_server

step "redis-py compatibility suite"
URLSEEN_PORT=$RESP_PORT python3 tests/compat/test_redis_py.py

if command -v redis-cli >/dev/null; then
    step "redis-cli"
    [[ "$(redis-cli -p "$RESP_PORT" PING)" == "PONG" ]] || fail "redis-cli PING"
    [[ "$(redis-cli -p "$RESP_PORT" URL.SEEN jobs http://a.example/)" == "0" ]] || fail "redis-cli URL.SEEN (new)"
    [[ "$(redis-cli -p "$RESP_PORT" URL.SEEN jobs HTTP://A.EXAMPLE:80/)" == "1" ]] || fail "redis-cli URL.SEEN (seen)"
    echo "redis-cli: ok"
else
    echo "redis-cli not installed: skipped (apt-get install redis-tools)"
fi

step "HTTP"
python3 - "$HTTP_PORT" <<'EOF'
import json, sys, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
assert urllib.request.urlopen(base + "/healthz").read() == b"ok\n"
req = urllib.request.Request(base + "/v1/namespaces/jobs/seen", method="POST",
    data=json.dumps({"urls": ["http://a.example/", "/rel", "https://new.example/"]}).encode(),
    headers={"Content-Type": "application/json"})
reply = json.load(urllib.request.urlopen(req))
assert reply["seen"] == [True, None, False], reply
assert reply["errors"][0]["index"] == 1, reply
metrics = urllib.request.urlopen(base + "/metrics").read().decode()
assert 'urlseen_namespace_urls{namespace="jobs",type="urlseen"}' in metrics, metrics
print("HTTP: ok")
EOF

step "SIGTERM during load exits 0, every acknowledged command answered"
python3 - "$RESP_PORT" "$SERVER_PID" <<'EOF' &
import os, signal, sys, threading, time, redis
port, pid = int(sys.argv[1]), int(sys.argv[2])
acked = []
def load(i):
    r = redis.Redis(port=port, socket_timeout=10)
    n = 0
    try:
        while True:
            pipe = r.pipeline(transaction=False)
            for j in range(64):
                pipe.execute_command("URL.SEEN", "sigterm", f"https://load.example/{i}/{n + j}")
            pipe.execute()
            n += 64
            acked.append(64)
    except (redis.ConnectionError, redis.TimeoutError, ConnectionResetError):
        pass
threads = [threading.Thread(target=load, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
time.sleep(1.0)
os.kill(pid, signal.SIGTERM)
for t in threads:
    t.join(20)
print(f"load: {sum(acked)} URLs acknowledged before the shutdown")
EOF
LOAD_PID=$!
STATUS=0
wait "$SERVER_PID" || STATUS=$?
SERVER_PID=""
wait "$LOAD_PID"
grep -q "shutting down" "$LOG" || { cat "$LOG"; fail "no shutdown in the log"; }
grep -q "bye" "$LOG" || { cat "$LOG"; fail "the server did not finish its shutdown"; }
[[ "$STATUS" == "0" ]] || { cat "$LOG"; fail "urlseen serve exited $STATUS after SIGTERM"; }
echo "urlseen serve exited 0 after SIGTERM"
# That nothing acknowledged is lost across the restart (serve --data, under fsync always and
# everysec) is checked by crates/cli/tests/serve.rs, which CI runs.

step "redis-compat: all checks passed"
