#!/usr/bin/env bash
# The crash check of docs/benchmarks.md, on a data directory that a scale run filled:
#   1. a second `urlseen filter --data DIR` over fresh URLs is killed with SIGKILL after SECONDS;
#   2. the restart recovers (timed, with its peak RSS), and every URL the killed run printed
#      (acknowledged) is fed back: none may be printed again but those of the last batch
#      printed, which the kill may have cut off before it was recorded (at-least-once);
#   3. the false-positive rate on 1,000,000 other fresh URLs.
#
#   scripts/kill-restart.sh DIR SECONDS
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1 secs=$2
bin=target/release/urlseen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# $! of a background pipeline is its last command: the filter.
"$bin" gen --count 200000000 --repeats 0 --seed 3 | "$bin" filter --data "$dir" > "$tmp/printed" &
filter=$!
sleep "$secs"
kill -9 "$filter"
wait "$filter" 2>/dev/null || true
# A line cut by the kill is not an acknowledgement.
if [[ -s $tmp/printed && $(tail -c1 "$tmp/printed" | od -An -c | tr -d ' ') != '\n' ]]; then
    sed -i '$ d' "$tmp/printed"
fi
echo "killed after ${secs}s: $(wc -l < "$tmp/printed") URLs printed (acknowledged)"
if ! again=$( { /usr/bin/time -v "$bin" filter --data "$dir" --stats < "$tmp/printed" 2> "$tmp/restart" ; } | tee "$tmp/again" | wc -l); then
    echo "the restart failed:" >&2
    grep -v '^\s' "$tmp/restart" >&2
    exit 1
fi
echo "restart: $(grep -o 'Elapsed (wall clock) time.*' "$tmp/restart"), peak RSS $(awk -F': ' '/Maximum resident/ {print $2}' "$tmp/restart") KiB"
# `filter` prints a batch (at most 4,096 lines) before it records it, so a kill between the two
# prints that batch's URLs again after the restart (at-least-once: repeated, never lost). Any
# other URL printed again would be a lost acknowledgement.
outside=$(tail -n 4096 "$tmp/printed" | grep -Fxvc -f - "$tmp/again" || true)
echo "acknowledged URLs printed again after the restart: $again ($outside of them before the last batch printed)"
# A seed no run used before, so these URLs are new to the directory.
seed=$(( $(date +%s) % 1000000 + 1000 ))
new=$("$bin" gen --count 1000000 --repeats 0 --seed "$seed" | "$bin" filter --data "$dir" | wc -l)
echo "other fresh URLs (seed $seed): 1000000, answered seen: $((1000000 - new)) (FPR $(echo "(1000000 - $new) / 1000000" | bc -l))"
[[ $outside -eq 0 ]]
