# Runs INSIDE the soft-RoCE guest (see ../test-rdma.sh, which prepends BIN= and TEST_BIN=).
set -eu
# Every client runs under `timeout 300`: a hang fails the test (exit 124) with the logs.
ip link set lo up
rdma link add rxe0 type rxe netdev lo      # gid[1] = ::ffff:127.0.0.1 (RoCE v2)
L=/tmp/dm-rdma-test; mkdir -p $L
MS="127.0.0.1:7471,127.0.0.1:7472"
fail() {
  echo "=== FAIL: $*"
  for f in $L/*; do echo "--- $f"; tail -n 15 "$f"; done
  exit 1
}
t0=$(date +%s)
step() { echo "=== [$(( $(date +%s) - t0 )) s] $*"; }

# Starts memory server $1 on port $2 with a region of $3 MiB; waits until it listens.
start_ms() {
  "$BIN/dm-memserver" --listen 127.0.0.1:$2 --id $1 --region-mb $3 --chunk-kib 1024 \
    --device rxe0 --gid-index 1 > $L/ms$1.out 2> $L/ms$1.log &
  eval MS$1_PID=$!
  i=0
  until grep -q ready $L/ms$1.out 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 300 ] || fail "memory server $1 did not start"
    kill -0 $(eval echo \$MS$1_PID) 2>/dev/null || fail "memory server $1 exited"
    sleep 0.1
  done
}
# Stops memory server $1 with SIGTERM and checks it exits cleanly.
stop_ms() {
  pid=$(eval echo \$MS$1_PID)
  kill -TERM $pid
  wait $pid || fail "memory server $1 did not exit cleanly on SIGTERM"
  grep -q "memory server stopped" $L/ms$1.log || fail "memory server $1 did not log its stop"
}

step "dm-verbs rdma tests (in-process memory servers)"
"$TEST_BIN" --ignored --test-threads 1 > $L/verbs-tests.log 2>&1 || fail "dm-verbs rdma tests"
grep "test result" $L/verbs-tests.log

step "two memory servers"
start_ms 0 7471 64
start_ms 1 7472 64

step "dm-bench verbs --fabric rdma, two client processes"
V="--fabric rdma --ms $MS --cs 1 --threads 2 --coros 4"
timeout 300 "$BIN/dm-bench" verbs $V --ops 4000 --seed 1 --json $L/verbs1.json > $L/verbs1.out 2>&1 & P1=$!
timeout 300 "$BIN/dm-bench" verbs $V --ops 4000 --seed 2 --json $L/verbs2.json > $L/verbs2.out 2>&1 & P2=$!
wait $P1 || fail "verbs client 1"
wait $P2 || fail "verbs client 2"
grep -h -E "throughput|latency|verified" $L/verbs1.out $L/verbs2.out
stop_ms 0; stop_ms 1

step "dm-bench ycsb --fabric rdma (FG+, workload a: gets+updates, after insert load), two clients"
start_ms 0 7471 64; start_ms 1 7472 64
Y="--fabric rdma --ms $MS --index fg --cs 1 --threads 2 --coros 2 --keys 2000 --ops 2000 --cache-mb 0"
timeout 300 "$BIN/dm-bench" ycsb $Y --workload a --client 0/2 --json $L/ycsb-a0.json > $L/ycsb-a0.out 2>&1 & P1=$!
timeout 300 "$BIN/dm-bench" ycsb $Y --workload a --client 1/2 --json $L/ycsb-a1.json > $L/ycsb-a1.out 2>&1 & P2=$!
wait $P1 || fail "ycsb a client 0"
wait $P2 || fail "ycsb a client 1"
grep -h -E " run |verified" $L/ycsb-a0.out $L/ycsb-a1.out
stop_ms 0; stop_ms 1

step "dm-bench ycsb --fabric rdma (FG+, workload e: scans+inserts), two clients"
start_ms 0 7471 64; start_ms 1 7472 64
timeout 300 "$BIN/dm-bench" ycsb $Y --workload e --scan-len 20 --client 0/2 --json $L/ycsb-e0.json > $L/ycsb-e0.out 2>&1 & P1=$!
timeout 300 "$BIN/dm-bench" ycsb $Y --workload e --scan-len 20 --client 1/2 --json $L/ycsb-e1.json > $L/ycsb-e1.out 2>&1 & P2=$!
wait $P1 || fail "ycsb e client 0"
wait $P2 || fail "ycsb e client 1"
grep -h -E " run |verified" $L/ycsb-e0.out $L/ycsb-e1.out

step "failure: a memory server killed mid-run gives client errors, not a hang"
n0=$(grep -c "QP connected" $L/ms1.log || true)
timeout 300 "$BIN/dm-bench" verbs $V --ops 400000 > $L/kill.out 2>&1 & P1=$!
# Wait until the client's setup QP and both core QPs to MS 1 are connected.
i=0
until [ "$(grep -c "QP connected" $L/ms1.log || true)" -ge $((n0 + 3)) ]; do
  i=$((i + 1)); [ $i -lt 600 ] || fail "verbs client did not connect"
  sleep 0.1
done
sleep 1
kill -KILL $MS1_PID; wait $MS1_PID 2>/dev/null || true
rc=0; wait $P1 || rc=$?
[ $rc -ne 0 ] || fail "verbs client succeeded although MS 1 was killed"
grep -q "QP to memory server 1 is in the error state" $L/kill.out || fail "no QP error reported"
grep -h "error" $L/kill.out | tail -n 2
stop_ms 0

step "failure: unreachable memory server and bad --ms are errors"
if "$BIN/dm-bench" verbs --fabric rdma --ms 127.0.0.1:7479 --ops 10 > $L/unreach.out 2>&1; then fail "unreachable MS accepted"; fi
grep -h "error" $L/unreach.out
if "$BIN/dm-bench" verbs --fabric rdma --ms nohost > $L/badms.out 2>&1; then fail "bad --ms accepted"; fi
grep -h "error" $L/badms.out

step "all rdma tests passed"
