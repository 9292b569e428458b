#!/usr/bin/env bash
# Ziegler et al. (SIGMOD'19) §6 on the sim fabric: the fine-grained (fg,
# without a CS cache, as in the paper), coarse-grained (nam-coarse) and hybrid
# (nam-hybrid) designs over a growing number of closed-loop clients.
# Cluster after the paper's: 4 MS with 10 RPC cores each (2 MSs per 20-core
# machine), compute servers of 20 threads with one outstanding operation each;
# uniform keys (200k instead of 100M: the trees are 4 levels high as theirs).
# Workloads (their Table 3): A point lookups; B range queries of selectivity
# 0.001 (200 keys); C 95% lookups + 5% inserts; D 50% + 50%; and A on
# data-skewed placement (80/12/5/3 of the keys on the four partitions).
# Writes docs/experiments/nam.csv. BIN: a prebuilt dm-bench; CLIENTS and
# WORKLOADS narrow the sweep.
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-200000}
OPS=${OPS:-50000}
OUT=${OUT:-docs/experiments/nam.csv}
CLIENTS=${CLIENTS:-20 60 120 240}
WORKLOADS=${WORKLOADS:-A B C D A-skew}
INDEXES=${INDEXES:-fg nam-coarse nam-hybrid}
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p dm-bench
  BIN=./target/release/dm-bench
fi
tmp=$(mktemp -d)
if [ "${APPEND:-0}" != 1 ]; then
  echo "workload,index,clients,mops,p50_us,p99_us,rpc_per_op,reads_per_op,bytes_per_op,rtts_per_op" > "$OUT"
fi
for w in $WORKLOADS; do
  case $w in
    A) args=(--workload c) ;;
    B) args=(--workload range-only --scan-len $((KEYS / 1000))) ;;
    C) args=(--workload read-intensive) ;;
    D) args=(--workload write-intensive) ;;
    A-skew) args=(--workload c) ;;
  esac
  ops=$OPS
  [ "$w" = B ] && ops=$((OPS / 10))
  for idx in $INDEXES; do
    skew=()
    [ "$w" = A-skew ] && [ "$idx" != fg ] && skew=(--nam-skew 80,12,5,3)
    for c in $CLIENTS; do
      j="$tmp/$w-$idx-$c.json"
      "$BIN" ycsb --index "$idx" "${args[@]}" "${skew[@]}" --theta 0 --keys "$KEYS" --ops "$ops" \
        --ms 4 --ms-cores 10 --cs $((c / 20)) --threads 20 --coros 1 --cache-mb 0 \
        --json "$j" > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
      python3 - "$j" "$w" "$idx" "$c" >> "$OUT" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
po = v["per_op"]
print(",".join(str(x) for x in [sys.argv[2], sys.argv[3], sys.argv[4],
    round(v["throughput_mops"], 3), round(v["latency_us"]["p50"], 2),
    round(v["latency_us"]["p99"], 2), round(po["rpc"], 2), round(po["read"], 2),
    round(po["bytes_read"] + po["bytes_written"]), round(po["rtts"], 2)]))
PY
      tail -1 "$OUT"
    done
  done
done
rm -rf "$tmp"
