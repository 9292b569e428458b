#!/usr/bin/env bash
# Real-RDMA test of dm: builds with --features rdma on the host, boots the
# soft-RoCE guest (scripts/softroce/), and inside it runs
# scripts/softroce/guest-test-rdma.sh: the dm-verbs rdma tests (in-process
# memory servers), then two dm-memserver processes on rxe0 with two dm-bench
# client processes each for `verbs`, `ycsb` and `check` on every landed index,
# perftest's READ rate (for rdma_efficiency), and the failure paths.
# Exit status: the guest script's (non-zero on any mismatch, error or hang).
# Env: SKIP_DEPS=1 skips the apt step; GUEST_TIMEOUT (default 900 s) bounds the guest;
# INDEXES (e.g. "dex dolphin") narrows the indexes of the ycsb and check steps,
# KILL_INDEXES those of the kill step (default: INDEXES if set, else every
# index the other steps run plus lockfree-art and smart-inplace).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi
if [ -z "${SKIP_DEPS:-}" ]; then $SUDO bash scripts/softroce/install-deps.sh >/dev/null; fi
bash scripts/softroce/build-guest.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
cargo build --release -p dm-bench --features rdma --bins --examples
# The test binary of dm-verbs' rdma tests (its path is printed by cargo).
TEST_BIN=$(cargo test --release -p dm-verbs --features rdma --test rdma_softroce --no-run --message-format=json 2>/dev/null \
  | sed -n 's/.*"executable":"\([^"]*rdma_softroce[^"]*\)".*/\1/p' | tail -n1)
[ -x "$TEST_BIN" ] || { echo "test-rdma: no rdma_softroce test binary"; exit 1; }
# The guest gets no environment: bake the paths into its script.
GS=$(mktemp "$ROOT/.rdma-guest.XXXXXX.sh")
trap 'rm -f "$GS"' EXIT
{
  echo "BIN='$CARGO_TARGET_DIR/release'"
  echo "TEST_BIN='$TEST_BIN'"
  if [ -n "${INDEXES:-}" ]; then echo "INDEXES='$INDEXES'"; fi
  if [ -n "${KILL_INDEXES:-${INDEXES:-}}" ]; then echo "KILL_INDEXES='${KILL_INDEXES:-$INDEXES}'"; fi
  cat scripts/softroce/guest-test-rdma.sh
} > "$GS"
GUEST_TIMEOUT=${GUEST_TIMEOUT:-900} bash scripts/softroce/run-guest.sh "$GS" "$ROOT"
