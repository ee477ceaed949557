#!/usr/bin/env bash
# One scale run of `urlseen filter`, as docs/benchmarks.md reports them: a generated stream of
# COUNT lines (REPEATS of them repeats) piped into `urlseen filter` under /usr/bin/time -v.
# Prints one markdown table row: lines, mode, peak RSS, bytes per distinct URL, rate, disk.
#
#   scripts/scale.sh COUNT REPEATS MODE [DIR]
#   MODE: spill (default filter), in-memory (--in-memory), data (--data DIR, fsync everysec),
#         exact (--data DIR --exact)
# Build first: cargo build --release -p urlseen. DIR (for data/exact) must not exist yet.
set -euo pipefail
cd "$(dirname "$0")/.."
count=$1 repeats=$2 mode=$3 dir=${4:-}
# URLSEEN_BIN: another build's binary (a before/after comparison runs two builds in turn).
bin=${URLSEEN_BIN:-target/release/urlseen}
[[ -x $bin ]] || { echo "build first: cargo build --release -p urlseen" >&2; exit 2; }
case $mode in
    spill) args=() ;;
    in-memory) args=(--in-memory) ;;
    data) args=(--data "$dir") ;;
    exact) args=(--data "$dir" --exact) ;;
    *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
log=$(mktemp)
trap 'rm -f "$log"' EXIT
new=$("$bin" gen --count "$count" --repeats "$repeats" \
    | /usr/bin/time -v "$bin" filter --stats "${args[@]}" 2>"$log" | wc -l)
peak_kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log")
rate=$(grep -o '([0-9]* lines/s)' "$log" | tr -dc 0-9)
disk=$(grep -o 'disk [0-9.]* MiB' "$log" | awk '{print $2}')
shape=$(grep -o '[0-9]* leaves, height [0-9]*' "$log")
printf '| %s | %s | %s new | %.0f MB | %.2f B | %.2fM lines/s | %s MiB | %s |\n' \
    "$count" "$mode" "$new" "$(echo "$peak_kib/1000" | bc -l)" \
    "$(echo "$peak_kib*1024/$new" | bc -l)" "$(echo "$rate/1000000" | bc -l)" "$disk" "$shape"
grep -E 'urlseen filter:' "$log" >&2
