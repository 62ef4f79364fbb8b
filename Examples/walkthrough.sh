#!/usr/bin/env bash
# The main job, end to end: init → unlock → put/cat in each class → lock → what fails and how → unlock.
#
# Runs against a throwaway domain under a mktemp directory, in its own session
# keyring (keys under @s, gone when the script ends), with the dpctl built by
# `swift build`. Usage: Examples/walkthrough.sh   (from the package root)
set -euo pipefail

# Re-exec inside a fresh anonymous session keyring so nothing reaches the user keyring @u.
if [[ -z "${DP_WALKTHROUGH_SESSION:-}" ]]; then
    exec env DP_WALKTHROUGH_SESSION=1 keyctl session - bash "$0" "$@"
fi

cd "$(dirname "$0")/.."
swift build --product dpctl >/dev/null
DPCTL="$(swift build --show-bin-path)/dpctl"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export DATAPROTECTION_HOME="$WORK/home" DATAPROTECTION_DEVICE_DIR="$WORK/devices" DATAPROTECTION_KEYRING=session
printf 'correct horse battery staple\n' > "$WORK/passphrase"
mkdir "$WORK/files"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# Runs a command that must fail, and shows its exit code and message.
expect_fail() {
    local want=$1; shift
    set +e; "$@" 2>"$WORK/err"; local got=$?; set -e
    sed 's/^/   stderr: /' "$WORK/err"
    echo "   exit code: $got (expected $want)"
    [[ $got == "$want" ]] || { echo "unexpected exit code"; exit 1; }
}

say "init: a new protection domain (fast Argon2id for the demo; the default calibrates to ~0.5 s)"
"$DPCTL" init --passphrase-file "$WORK/passphrase" --kdf-preset interactive > "$WORK/recovery-key"
echo "   recovery key (shown once at init): $(cat "$WORK/recovery-key")"

say "status before unlock: only class none is available; completeUnlessOpen can still create"
"$DPCTL" status

say "unlock (passphrase from a file here; on a terminal dpctl asks without echo)"
"$DPCTL" unlock --passphrase-file "$WORK/passphrase"
"$DPCTL" status

say "put and cat one file in each class"
for c in complete completeUnlessOpen completeUntilFirstUserAuthentication none; do
    echo "a secret kept as $c" | "$DPCTL" put --class "$c" "$WORK/files/$c.txt"
    printf '   %-38s -> ' "$c"; "$DPCTL" cat "$WORK/files/$c.txt"
done
"$DPCTL" ls "$WORK/files"

say "lock: complete and completeUnlessOpen leave the keyring"
"$DPCTL" lock
"$DPCTL" status

say "reading class complete now fails cleanly: exit 75 (locked), no plaintext"
expect_fail 75 "$DPCTL" cat "$WORK/files/complete.txt"
say "so does opening an existing completeUnlessOpen file"
expect_fail 75 "$DPCTL" cat "$WORK/files/completeUnlessOpen.txt"
say "but a new completeUnlessOpen file can be created while locked (sealed to the class public key)"
echo "written while locked" | "$DPCTL" put --class completeUnlessOpen "$WORK/files/inbox.txt" && echo "   ok"
say "creating a complete file while locked fails, and leaves nothing behind"
expect_fail 75 "$DPCTL" put --class complete "$WORK/files/new.txt" < /dev/null
[[ ! -e "$WORK/files/new.txt" ]] && echo "   no file was created"
say "completeUntilFirstUserAuthentication and none still read"
"$DPCTL" cat "$WORK/files/completeUntilFirstUserAuthentication.txt" "$WORK/files/none.txt"

say "a wrong passphrase: exit 77, the keybag unchanged"
printf 'wrong\n' > "$WORK/wrong"
expect_fail 77 "$DPCTL" unlock --passphrase-file "$WORK/wrong"

say "unlock again: everything reads, including the file created while locked"
"$DPCTL" unlock --passphrase-file "$WORK/passphrase"
"$DPCTL" cat "$WORK/files/complete.txt" "$WORK/files/inbox.txt"

say "lock --evict-all (the analogue of a reboot): only class none remains"
"$DPCTL" lock --evict-all
expect_fail 75 "$DPCTL" cat "$WORK/files/completeUntilFirstUserAuthentication.txt"
"$DPCTL" cat "$WORK/files/none.txt"

say "done: the throwaway domain and its session keyring disappear now"
