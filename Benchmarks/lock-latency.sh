#!/usr/bin/env bash
# Lock latency with open handles: 4 example-service processes hold N open `complete`
# handles between them (N = 1, 100, 1000) and re-key them after every unlock; `dpctl lock --now`
# is then timed, ROUNDS times per N. Reports the library's own figure (lock start to the
# last process's acknowledgement that it wiped its keys) and the whole `dpctl lock`
# process, medians (`--now`: without the `willLock` grace that a plain `dpctl lock` waits,
# 500 ms by default). Runs in its own session keyring and a throwaway domain.
#   Benchmarks/lock-latency.sh [ROUNDS]
set -euo pipefail
if [[ -z "${DP_BENCH_SESSION:-}" ]]; then exec env DP_BENCH_SESSION=1 keyctl session - bash "$0" "$@"; fi
cd "$(dirname "$0")/.."
rounds=${1:-15}
scripts/build-release dpctl >/dev/null
scripts/build-release --package-path Examples dp-example-service >/dev/null
bin=$(swift build -c release --show-bin-path)
examples=$(swift build --package-path Examples -c release --show-bin-path)
work=$(mktemp -d); trap 'pkill -f "dp-example-service --work $work" || true; rm -rf "$work"' EXIT
export DATAPROTECTION_HOME=$work/home DATAPROTECTION_DEVICE_DIR=$work/devices DATAPROTECTION_KEYRING=session
printf 'benchmark passphrase\n' > "$work/pw"
"$bin/dpctl" init --passphrase-file "$work/pw" --kdf-preset interactive >/dev/null 2>&1
"$bin/dpctl" unlock --passphrase-file "$work/pw" 2>/dev/null
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "| open complete handles (4 processes) | lock, all processes acknowledged (median ms) | \`dpctl lock --now\` whole process (median ms) | processes acknowledging |"
echo "|---:|---:|---:|---:|"
for n in 1 100 1000; do
  pkill -f "dp-example-service --work $work" || true
  for i in 0 1 2 3; do
    hold=$(( n / 4 + (i < n % 4 ? 1 : 0) ))
    "$examples/dp-example-service" --work "$work/w$n" --seconds 600 --hold "$hold" --tasks-per-class 0 --ready "$work/ready-$n-$i" >/dev/null &
  done
  for i in 0 1 2 3; do while [ ! -f "$work/ready-$n-$i" ]; do sleep 0.05; done; done
  libs=(); procs=(); acks=0
  for r in $(seq "$rounds"); do
    t0=$(date +%s%N)
    msg=$("$bin/dpctl" lock --now 2>&1)  # --now: no `willLock` grace (500 ms by default), the lock itself
    t1=$(date +%s%N)
    libs+=("$(sed -n 's/.* in \([0-9.]*\) ms.*/\1/p' <<<"$msg")")
    acks=$(sed -n 's/.*; \([0-9]*\) process(es).*/\1/p' <<<"$msg")
    procs+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", (b-a)/1e6}')")
    "$bin/dpctl" unlock --passphrase-file "$work/pw" 2>/dev/null
    sleep 0.2  # the services re-key their handles after didUnlock
  done
  echo "| $n | $(printf '%s\n' "${libs[@]}" | median) | $(printf '%s\n' "${procs[@]}" | median) | $acks |"
done
