#!/usr/bin/env bash
# Issue 32, item 5: boots the soft-RoCE guest and runs
# scripts/softroce/guest-bench.sh there (perftest's READ rate and the
# CPU-bound ycsb cells, medians of RUNS runs; an idle memory server's
# wake-ups). Not part of CI. Env: KEYS, OPS, WARMUP, RUNS (see the guest
# script), SKIP_DEPS=1, GUEST_TIMEOUT (default 5400 s).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi
if [ -z "${SKIP_DEPS:-}" ]; then $SUDO bash scripts/softroce/install-deps.sh >/dev/null; fi
bash scripts/softroce/build-guest.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
cargo build --release -p dm-bench --features rdma --bins
GS=$(mktemp "$ROOT/.rdma-bench.XXXXXX.sh")
trap 'rm -f "$GS"' EXIT
{
  echo "BIN='$CARGO_TARGET_DIR/release'"
  for v in KEYS OPS WARMUP RUNS; do
    if [ -n "${!v:-}" ]; then echo "$v='${!v}'"; fi
  done
  cat scripts/softroce/guest-bench.sh
} > "$GS"
GUEST_TIMEOUT=${GUEST_TIMEOUT:-5400} bash scripts/softroce/run-guest.sh "$GS" "$ROOT"
