#!/usr/bin/env bash
# Unlock latency with and without the TPM binding, side by side in one run (issue 24): for each Argon2id preset,
# one domain bound to a software TPM (swtpm, started here on a free port) and one bound to the device secret file
# alone, unlocked and locked alternately ROUNDS times; the whole `dpctl unlock` process, medians. The TPM commands
# one unlock sends are counted from tpm2-tss's TCTI debug log. swtpm answers in microseconds; a hardware TPM takes
# tens to hundreds of milliseconds per command, so on real hardware multiply the count, not this difference.
#   Benchmarks/tpm-unlock.sh [ROUNDS]
set -euo pipefail
if [[ -z "${DP_BENCH_SESSION:-}" ]]; then exec env DP_BENCH_SESSION=1 keyctl session - bash "$0" "$@"; fi
cd "$(dirname "$0")/.."
rounds=${1:-15}
scripts/build-release dpctl >/dev/null
bin=$(swift build -c release --show-bin-path)
work=$(mktemp -d)
port=$(( (RANDOM % 20000 + 30000) & ~1 ))
swtpm socket --tpm2 --tpmstate dir="$work" --server type=tcp,port=$port --ctrl type=tcp,port=$((port + 1)) --flags not-need-init,startup-clear &
swtpm_pid=$!
trap 'kill $swtpm_pid 2>/dev/null; rm -rf "$work"' EXIT
until (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null; do sleep 0.05; done
export DATAPROTECTION_KEYRING=session DATAPROTECTION_TPM_TCTI=swtpm:host=127.0.0.1,port=$port
printf 'benchmark passphrase\n' > "$work/pw"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", (b-a)/1e6}'; }
echo "| Argon2id preset | unlock, file binding (median ms) | unlock, tpm2 binding on swtpm (median ms) | difference (ms) | TPM commands per unlock |"
echo "|---|---:|---:|---:|---:|"
for preset in minimum interactive; do
  for b in file tpm2; do
    DATAPROTECTION_HOME=$work/$preset-$b/home DATAPROTECTION_DEVICE_DIR=$work/$preset-$b/devices \
      "$bin/dpctl" init --binding $b --passphrase-file "$work/pw" --kdf-preset $preset >/dev/null 2>&1
  done
  declare -A times=([file]="" [tpm2]="")
  for r in $(seq "$rounds"); do
    for b in file tpm2; do
      export DATAPROTECTION_HOME=$work/$preset-$b/home DATAPROTECTION_DEVICE_DIR=$work/$preset-$b/devices
      t0=$(date +%s%N)
      "$bin/dpctl" unlock --passphrase-file "$work/pw" 2>/dev/null
      t1=$(date +%s%N)
      times[$b]+="$(ms "$t0" "$t1") "
      "$bin/dpctl" lock --now 2>/dev/null
    done
  done
  export DATAPROTECTION_HOME=$work/$preset-tpm2/home DATAPROTECTION_DEVICE_DIR=$work/$preset-tpm2/devices
  commands=$(TSS2_LOG=tcti+debug "$bin/dpctl" unlock --passphrase-file "$work/pw" 2>&1 | grep -c "Sending command" || true)
  "$bin/dpctl" lock --now 2>/dev/null
  f=$(tr ' ' '\n' <<<"${times[file]}" | grep . | median)
  t=$(tr ' ' '\n' <<<"${times[tpm2]}" | grep . | median)
  echo "| $preset | $f | $t | $(awk -v a="$f" -v b="$t" 'BEGIN{printf "%.1f", b-a}') | $commands |"
done
echo
echo "$rounds rounds each, alternated; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)."
