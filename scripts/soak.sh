#!/usr/bin/env bash
# A linearizability soak on sim: `dm-bench check` of every index over
# several cluster shapes with all seven of soft-RoCE's faults, many seeds
# each. Not part of CI (CI runs `check`'s default shape and pinned seeds
# in dm-bench/tests/cli_crash.rs): the shapes here crowd more clients onto
# fewer keys and more cores, where lock CASes retry, wait for release
# requests and race a crashed CS's recovery. Four lock-recovery bugs of
# 2026-11-30 showed only at such shapes (docs/rdma-sim-faults.md, "Two holders of one
# lock, found at more clients").
#
# Env:
#   SEEDS     seeds per index and shape (default 100)
#   FIRST     first seed (default 100000); shape k runs FIRST + k*SEEDS on
#   INDEXES   space-separated indexes (default: every index of this build)
#   SHAPES    ';'-separated `check` flags, one shape each (default below)
#   FAULTS    `--faults` (default all seven)
#   JOBS      parallel `check` processes (default: the CPU count)
#   OUT       directory for each run's output (default: a new /tmp dir)
#   BIN       a dm-bench binary (default: build the release one)
#
# Exit 0 when no run is found not linearizable; otherwise 1. Prints the
# runs that failed or stayed undecided with their commands (rerun one with `--first-seed S --seeds 1` and
# `--history-out F` to look at its history).
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-100}
FIRST=${FIRST:-100000}
FAULTS=${FAULTS:-torn,delay,unreported,replay,redo,writeback,crash}
JOBS=${JOBS:-$(nproc)}
SHAPES=${SHAPES:-"--clients 24 --keys 64;--clients 48 --keys 48 --cores 3;--clients 64 --keys 32 --cores 4;--clients 32 --keys 256 --cores 2;--clients 16 --keys 8 --cores 4;--clients 64 --keys 96 --cores 4 --ops 60"}
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p dm-bench
  BIN=${CARGO_TARGET_DIR:-target}/release/dm-bench
fi
if [ -z "${INDEXES:-}" ]; then
  # The refusal of an unknown index lists this build's indexes.
  INDEXES=$({ "$BIN" check --index '?' 2>&1 || true; } | sed -n 's/.*this build has //p' | tr -d ',')
fi
OUT=${OUT:-$(mktemp -d /tmp/dm-soak.XXXXXX)}
mkdir -p "$OUT"

IFS=';' read -ra SHAPE <<< "$SHAPES"
LIST="$OUT/runs"
: > "$LIST"
: > "$OUT/summary"
for k in "${!SHAPE[@]}"; do
  for i in $INDEXES; do
    echo "check --index $i --faults $FAULTS ${SHAPE[$k]} --seeds $SEEDS --first-seed $((FIRST + k * SEEDS))" >> "$LIST"
  done
done
echo "soak: $(wc -l < "$LIST") runs of $SEEDS seeds, $JOBS at a time, output in $OUT"

# One run: ok, UNDECIDED (the checker's budget ran out on a history too
# large to decide: not a verdict) or FAIL.
run() {
  local n=$1 cmd=$2
  # shellcheck disable=SC2086
  if "$BIN" $cmd > "$OUT/$n.log" 2>&1; then
    echo "ok        $cmd"
  elif grep -q "NOT PROVEN" "$OUT/$n.log"; then
    echo "UNDECIDED $cmd (log $OUT/$n.log)"
  else
    echo "FAIL      $cmd (log $OUT/$n.log)"
  fi
}
start=$(date +%s)
n=0
while read -r cmd; do
  n=$((n + 1))
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  run "$n" "$cmd" >> "$OUT/summary" &
done < "$LIST"
wait
sort -k2 "$OUT/summary" | grep -v '^ok' || true
fails=$(grep -c '^FAIL' "$OUT/summary" || true)
echo "soak: $(grep -c '^ok' "$OUT/summary" || true) ok, $(grep -c '^UNDECIDED' "$OUT/summary" || true) undecided, $fails failed, $(( $(date +%s) - start )) s (summary: $OUT/summary)"
[ "$fails" = 0 ]
