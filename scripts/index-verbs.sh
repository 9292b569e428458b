#!/usr/bin/env bash
# Verbs per warm get and per update of every index (the README's index table):
# sim, 1 CS x 1 thread x 1 coroutine, 100,000 keys, uniform YCSB A, default
# caches. Writes one JSON per index to ${OUT:-target/index-verbs} and prints
# the table. Usage: bash scripts/index-verbs.sh (after cargo build --release -p dm-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-target/release/dm-bench}
OUT=${OUT:-target/index-verbs}
INDEXES=${INDEXES:-"fg sherman-combine sherman-onchip sherman-hier sherman nam-coarse nam-hybrid dex art lockfree-art smart-inplace smart dolphin"}
mkdir -p "$OUT"
for i in $INDEXES; do
  "$B" ycsb --index "$i" --workload a --keys 100000 --ops 20000 --theta 0 \
    --cs 1 --threads 1 --coros 1 --json "$OUT/$i.json" > "$OUT/$i.txt"
done
INDEXES="$INDEXES" OUT="$OUT" python3 - <<'P'
import json, os
out = os.environ["OUT"]
print("index           | get: READ WRITE CAS FAA RPC RTT | update: READ WRITE CAS FAA RPC RTT | MS bytes allocated | CS cache bytes")
for i in os.environ["INDEXES"].split():
    d = json.load(open(f"{out}/{i}.json"))
    k = d["per_op_by_kind"]
    f = lambda o: " ".join("%.2f" % o[x] for x in ("read", "write", "cas", "faa", "rpc", "rtts"))
    m = d["memory"]
    print(f"{i:15} | {f(k['get'])} | {f(k['update'])} | {m['ms_bytes_allocated']} | {m['cs_cache_bytes']}")
P
