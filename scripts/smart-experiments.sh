#!/usr/bin/env bash
# SMART §5.2 (Fig. 14/15) at a scaled-down version of the paper's cluster on
# the sim fabric: 2 MS, 16 CS x 2 threads x 8 coroutines (256 clients), zipf
# 0.99, 8-byte values; integer keys (1M) and 32-byte string keys (800k PyPI names).
# Writes docs/experiments/smart.csv and prints the markdown table of
# docs/experiments/smart.md. Needs python3 for the table.
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-1000000}
OPS=${OPS:-1000000}
STR_KEYS=${STR_KEYS:-800000}
OUT=${OUT:-docs/experiments/smart.csv}
# INT_WORKLOADS / STR_WORKLOADS pick the workloads per key type (default: load a b c d);
# INDEXES the indexes (default: smart sherman art); APPEND=1 adds rows to an
# existing CSV instead of starting it anew. BIN runs a copy of dm-bench built
# before (so that building while the script runs does not change the binary).
INDEXES=${INDEXES:-smart sherman art}
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p dm-bench
  BIN=./target/release/dm-bench
fi
tmp=$(mktemp -d)
if [ "${APPEND:-0}" != 1 ]; then
  echo "keys,workload,index,mops,p99_us,reads_per_op,bytes_read_per_op,rtts_per_op,cache_mib,ms_mib" > "$OUT"
fi
for keys in int str; do
  wls=${INT_WORKLOADS:-load a b c d}
  [ "$keys" = str ] && wls=${STR_WORKLOADS:-load a b c d}
  for w in $wls; do
    for idx in $INDEXES; do
      extra=(--keys "$KEYS" --ops "$OPS")
      if [ "$keys" = str ]; then
        # The PyPI file has 860k names of at most 32 bytes.
        extra=(--keys "$STR_KEYS" --ops "$STR_KEYS" --key-file ../shared/data/keys/pypi-names.txt.gz)
      fi
      j="$tmp/$keys-$w-$idx.json"
      "$BIN" ycsb --index "$idx" --workload "$w" \
        --ms 2 --cs 16 --threads 2 --coros 8 "${extra[@]}" --json "$j" > "$tmp/log" 2>&1 \
        || { cat "$tmp/log"; exit 1; }
      python3 - "$j" "$keys" "$w" "$idx" >> "$OUT" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
po = v["per_op"]
print(",".join(str(x) for x in [sys.argv[2], sys.argv[3], sys.argv[4],
    round(v["throughput_mops"], 3), round(v["latency_us"]["p99"], 2), round(po["read"], 2),
    round(po["bytes_read"]), round(po["rtts"], 2),
    round(v["cache"]["bytes"] / 2**20, 1), round(v["memory"]["ms_bytes_used"] / 2**20, 1)]))
PY
      tail -1 "$OUT"
    done
  done
done
rm -rf "$tmp"
