#!/usr/bin/env bash
# Whole-process dpctl figures for BENCHMARKS.md "Keys, unlock and rotation" (the in-process
# figures come from `scripts/build-release --package-path Benchmarks dp-keybench && Benchmarks/.build/release/dp-keybench`). Needs hyperfine (Debian: apt-get install hyperfine).
# Runs in its own session keyring against a throwaway domain with the default (calibrated) Argon2id.
set -euo pipefail
if [[ -z "${DP_KEYS_BENCH_SESSION:-}" ]]; then exec env DP_KEYS_BENCH_SESSION=1 keyctl session - bash "$0" "$@"; fi
cd "$(dirname "$0")/.."
scripts/build-release dpctl >/dev/null
DPCTL="$(swift build -c release --show-bin-path)/dpctl"
WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"' EXIT
export DATAPROTECTION_HOME="$WORK/home" DATAPROTECTION_DEVICE_DIR="$WORK/devices" DATAPROTECTION_KEYRING=session
printf 'benchmark passphrase\n' > "$WORK/pw"
"$DPCTL" init --passphrase-file "$WORK/pw" 2>&1 >/dev/null | grep Argon2id
"$DPCTL" unlock --passphrase-file "$WORK/pw"
echo hello | "$DPCTL" put --class complete "$WORK/a"
echo hello | "$DPCTL" put --class none "$WORK/d"
"$DPCTL" status --json | grep -A2 '"kdf"'
hyperfine --warmup 2 --runs 10 -N --export-markdown "$WORK/unlock.md" \
    "$DPCTL unlock --passphrase-file $WORK/pw"
hyperfine --warmup 5 --runs 50 -N --export-markdown "$WORK/cat.md" \
    "$DPCTL cat $WORK/a" "$DPCTL cat $WORK/d" "$DPCTL status"
cat "$WORK/unlock.md" "$WORK/cat.md"
