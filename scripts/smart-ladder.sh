#!/usr/bin/env bash
# SMART §5.3.1 (Fig. 18, factor analysis) on the sim fabric at the cluster of
# scripts/smart-experiments.sh: 2 MS, 16 CS x 2 threads x 8 coroutines, zipf
# 0.99, 1M integer keys, 1M operations. Starting from the DM-ported ART
# (`--index art`), each rung adds one technique and is measured on the
# workload the paper measures it on, against the rung below:
#   +lock-free internal nodes  LOAD  art            -> lockfree-art
#   +in-place leaf update      B     lockfree-art   -> smart-inplace
#   +rear-embedded lock        A     smart-inplace  -> smart (rd, wc off)
#   +read delegation           C     smart (rd, wc off) -> smart (wc off)
#   +write combining           A     smart (wc off) -> smart
# Writes docs/experiments/smart-ladder.csv (one row per run). Needs python3.
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-1000000}
OPS=${OPS:-1000000}
OUT=${OUT:-docs/experiments/smart-ladder.csv}
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p dm-bench
  BIN=./target/release/dm-bench
fi
tmp=$(mktemp -d)
echo "workload,index,smart_off,mops,p50_us,p99_us,reads_per_op,cas_per_op,rtts_per_op,stale_leaves" > "$OUT"
# workload index smart-off ("-" for none)
while read -r w idx off; do
  flags=()
  [ "$off" != - ] && flags=(--smart-off "$off")
  j="$tmp/$w-$idx-$off.json"
  "$BIN" ycsb --index "$idx" --workload "$w" --ms 2 --cs 16 --threads 2 --coros 8 \
    --keys "$KEYS" --ops "$OPS" "${flags[@]}" --json "$j" > "$tmp/log" 2>&1 \
    || { cat "$tmp/log"; exit 1; }
  python3 - "$j" "$w" "$idx" "$off" >> "$OUT" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
po, lat = v["per_op"], v["latency_us"]
if v["mismatches"] != 0:
    sys.exit(f"{sys.argv[1:]}: {v['mismatches']} mismatches")
# The smart_off column lists the techniques switched off, "+"-separated.
print(",".join(str(x) for x in sys.argv[2:4] + [sys.argv[4].replace(",", "+"),
    round(v["throughput_mops"], 3), round(lat["p50"], 2), round(lat["p99"], 2),
    round(po["read"], 2), round(po["cas"], 2), round(po["rtts"], 2),
    v["cache"].get("stale_leaves", 0)]))
PY
  tail -1 "$OUT"
done <<'RUNS'
load art -
load lockfree-art -
b lockfree-art -
b smart-inplace -
a smart-inplace -
a smart rd,wc
c smart rd,wc
c smart wc
a smart wc
a smart -
RUNS
rm -rf "$tmp"
