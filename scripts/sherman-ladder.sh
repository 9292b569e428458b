#!/usr/bin/env bash
# Sherman's technique ladder (SIGMOD'22 §5.2, Fig. 5: skewed, zipf 0.99) at
# the paper's cluster on the sim fabric: 8 MS, 8 CS x 22 threads x 3
# coroutines (528 clients, the code's kCoroCnt), 1 KB nodes, 10M 8-byte keys
# bulk-loaded 80% full, an index cache of 500 MB per CS; write-intensive (50%
# upsert / 50% lookup) and write-only. Rungs: fg (FG+), sherman-combine,
# sherman-onchip, sherman-hier, sherman (+ two-level versions).
# Writes docs/experiments/sherman-ladder.csv. BIN: a prebuilt dm-bench;
# KEYS, OPS, WORKLOADS, INDEXES narrow it.
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-10000000}
OPS=${OPS:-1000000}
OUT=${OUT:-docs/experiments/sherman-ladder.csv}
WORKLOADS=${WORKLOADS:-write-intensive write-only}
INDEXES=${INDEXES:-fg sherman-combine sherman-onchip sherman-hier sherman}
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p dm-bench
  BIN=./target/release/dm-bench
fi
tmp=$(mktemp -d)
if [ "${APPEND:-0}" != 1 ]; then
  echo "workload,index,mops,p50_us,p99_us,rtts_per_op,cas_per_op,bytes_written_per_op" > "$OUT"
fi
for w in $WORKLOADS; do
  for idx in $INDEXES; do
    j="$tmp/$w-$idx.json"
    "$BIN" ycsb --index "$idx" --workload "$w" --keys "$KEYS" --ops "$OPS" --load bulk \
      --ms 8 --cs 8 --threads 22 --coros 3 --cache-mb 500 --json "$j" > "$tmp/log" 2>&1 \
      || { cat "$tmp/log"; exit 1; }
    python3 - "$j" "$w" "$idx" >> "$OUT" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
po = v["per_op"]
print(",".join(str(x) for x in [sys.argv[2], sys.argv[3],
    round(v["throughput_mops"], 3), round(v["latency_us"]["p50"], 2),
    round(v["latency_us"]["p99"], 2), round(po["rtts"], 2), round(po["cas"], 2),
    round(po["bytes_written"])]))
PY
    tail -1 "$OUT"
  done
done
rm -rf "$tmp"
