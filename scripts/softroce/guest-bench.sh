# Runs INSIDE the soft-RoCE guest (see ../bench-rdma.sh, which prepends BIN=).
# Issue 32, item 5: perftest's READ rate and the CPU-bound cells of item 3,
# each as ops/s and as a ratio to that READ rate, the median of RUNS runs:
# one client process, one thread, one coroutine, two memory servers, uniform
# keys, a 1 MiB cache; read-only (YCSB C) for fg, sherman, smart and dex,
# 50/50 read/update (YCSB A) for smart and dex. The B+trees and DEX are
# bulk-loaded, SMART by insert. Then how often an idle memory server wakes.
# Not part of CI (a full run takes tens of minutes of emulated CPU).
# Env: KEYS (100000), OPS (5000 measured), WARMUP (5000), RUNS (3).
set -eu
KEYS=${KEYS:-100000}; OPS=${OPS:-5000}; WARMUP=${WARMUP:-5000}; RUNS=${RUNS:-3}
ip link set lo up
rdma link add rxe0 type rxe netdev lo
find /etc/libibverbs.d -name '*.driver' ! -name rxe.driver -delete 2>/dev/null || true
L=/tmp/dm-rdma-bench; mkdir -p $L
MS="127.0.0.1:7471,127.0.0.1:7472"
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print 0 }'; }

launch_ms() {
  "$BIN/dm-memserver" --listen 127.0.0.1:$2 --id $1 --region-mb $3 --chunk-kib 1024 \
    --device rxe0 --gid-index 1 > $L/ms$1.out 2> $L/ms$1.log &
  eval MS$1_PID=$!
}
wait_ms() {
  i=0
  until grep -q ready $L/ms$1.out 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 600 ] || { echo "memory server $1 did not start"; exit 1; }
    sleep 0.1
  done
}
stop_ms() { kill -TERM $(eval echo \$MS$1_PID); wait $(eval echo \$MS$1_PID) || true; }

echo "=== perftest ib_read_bw -s 64, one QP: $RUNS runs"
for r in $(seq $RUNS); do
  ib_read_bw -d rxe0 -x 1 -F -s 64 -n 20000 > $L/perf-srv.log 2>&1 & PS=$!
  i=0
  until timeout 120 ib_read_bw -d rxe0 -x 1 -F -s 64 -n 20000 127.0.0.1 > $L/perf.log 2>&1; do
    i=$((i + 1)); [ $i -lt 20 ] || break; sleep 0.5
  done
  wait $PS || true
  # The result line: #bytes #iterations BW-peak[MB/s] BW-average[MB/s] MsgRate[Mpps]
  awk '$1 == 64 && $2 == 20000 { print $5 }' $L/perf.log | tail -n 1
done > $L/perf.rates
echo "  M READs/s per run: $(paste -s -d ' ' $L/perf.rates)"
READ_MOPS=$(median < $L/perf.rates)
echo "  median: $READ_MOPS M READs/s"

# One cell: index $1, workload $2, load $3; prints the runs and the median.
cell() {
  for r in $(seq $RUNS); do
    launch_ms 0 7471 256; launch_ms 1 7472 256; wait_ms 0; wait_ms 1
    timeout 1800 "$BIN/dm-bench" ycsb --fabric rdma --ms $MS --rdma-staging-kib 1024 \
      --index $1 --workload $2 --theta 0 --load $3 --keys $KEYS --ops $OPS --warmup $WARMUP \
      --cs 1 --threads 1 --coros 1 --cache-mb 1 --seed $r --json $L/cell.json > $L/cell.out 2>&1 \
      || { echo "  $1 $2 run $r failed:"; tail -n 20 $L/cell.out; } >&2
    stop_ms 0; stop_ms 1
    sed -n 's/.*"throughput_mops": *\([0-9.eE+-]*\).*/\1/p' $L/cell.json | head -n 1 \
      | awk '{printf "%.0f\n", $1 * 1e6}'
  done > $L/cell.rates
  m=$(median < $L/cell.rates)
  printf "  %-8s %-3s ops/s %-24s median %7s  ratio to READs %s\n" $1 $2 \
    "$(paste -s -d ' ' $L/cell.rates)" $m \
    "$(awk -v o=$m -v r=$READ_MOPS 'BEGIN { if (r > 0) printf "%.3f", o / (r * 1e6); else print "-" }')"
}

echo "=== ycsb, 1 thread x 1 coroutine, $KEYS keys, $WARMUP warm-up + $OPS measured ops, uniform, 1 MiB cache; $RUNS runs per cell"
cell fg c bulk
cell sherman c bulk
cell smart c insert
cell dex c bulk
cell smart a insert
cell dex a bulk

echo "=== an idle memory server, 5 s"
launch_ms 0 7471 16; wait_ms 0; sleep 5; stop_ms 0
grep "dm-memserver stopped" $L/ms0.out
