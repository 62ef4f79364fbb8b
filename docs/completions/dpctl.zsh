#compdef dpctl

__dpctl_complete() {
    local -ar non_empty_completions=("${@:#(|:*)}")
    local -ar empty_completions=("${(M)@:#(|:*)}")
    _describe -V '' non_empty_completions -- empty_completions -P $'\'\''
}

__dpctl_custom_complete() {
    local -a completions
    completions=("${(@f)"$("${command_name}" "${@}" "${command_line[@]}")"}")
    if [[ "${#completions[@]}" -gt 1 ]]; then
        __dpctl_complete "${completions[@]:0:-1}"
    fi
}

__dpctl_cursor_index_in_current_word() {
    if [[ -z "${QIPREFIX}${IPREFIX}${PREFIX}" ]]; then
        printf 0
    else
        printf %s "${#${(z)LBUFFER}[-1]}"
    fi
}

_dpctl() {
    emulate -RL zsh -G
    setopt extendedglob nullglob numericglobsort
    unsetopt aliases banghist

    local -xr SAP_SHELL=zsh
    local -x SAP_SHELL_VERSION
    SAP_SHELL_VERSION="$(builtin emulate zsh -c 'printf %s "${ZSH_VERSION}"')"
    local -r SAP_SHELL_VERSION

    local context state state_descr line
    local -A opt_args

    local -r command_name="${words[1]}"
    local -ar command_line=("${words[@]}")
    local -ir current_word_index="$((CURRENT - 1))"

    local -i ret=1
    local -ar arg_specs=(
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
        '(-): :->command'
        '(-)*:: :->arg'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0
    case "${state}" in
    command)
        local -ar subcommands=(
            'init:Create a protection domain: device secret, class keys, keybag. Prints the recovery key once.'
            'unlock:Unlock the domain: the passphrase'\''s class keys go into the kernel keyring.'
            'lock:Lock the domain: remove classes complete and completeUnlessOpen from the keyring.'
            'status:Show the lock state of each class, the auto-lock deadline and the keyring key ids.'
            'passwd:Change the passphrase (rewraps the class keys only: the same cost for 10 or 10,000 files).'
            'recover:Restore access with the recovery key: sets a new passphrase and a new device secret.'
            'bind:Bind an existing domain to this machine'\''s TPM 2.0 (--binding tpm2), or back to the device secret file alone (--binding file).'
            'rotate:Rotate a class key: new generation, per-file keys rewrapped header by header (contents are not re-encrypted).'
            'wipe:Crypto-shred the domain: destroy its keybag and device secret so every protected file is unreadable at once.'
            'put:Write standard input (or --from FILE) to a protected file, atomically.'
            'cat:Write the plaintext of protected files to standard output.'
            'ls:List protected files: class, plaintext size, key generation, content type (no key needed).'
            'protect:Convert ordinary files (or whole trees) into protected files in place, each atomically; a SQLite database with its journal and WAL as one unit.'
            'unprotect:Convert protected files (or whole trees) back into ordinary files in place, each atomically; a database with its journal and WAL as one unit.'
            'set-class:Move protected files to another class by rewrapping their per-file keys (headers only).'
            'repair:Finish what a crash interrupted: roll journals back (or forward) and remove dead writers'\'' temporary files.'
            'backup-excludes:Print the exclude list of a container for restic, borg, rsync or GNU tar.'
            'backup-list:Show what a backup of a container holds, with sizes (ciphertext bytes).'
            'purge:Delete what containers hold in tmp and Library/Caches, oldest first.'
            'audit:List files left plaintext where a container'\''s policy expects protection; exits 3 when it finds any.'
            'bundle:Seal a container'\''s read-only bundle, and verify the seal.'
            'doctor:Check the kernel keyring and this uid'\''s key quota; say which sysctl to raise, and to what, for N more unlocked domains.'
            'help:Show subcommand help information.'
        )
        _describe -V subcommand subcommands && ret=0
        ;;
    arg)
        case "${words[1]}" in
        init|unlock|lock|status|passwd|recover|bind|rotate|wipe|put|cat|ls|protect|unprotect|set-class|repair|backup-excludes|backup-list|purge|audit|bundle|doctor|help)
            "_dpctl_${words[1]}" && ret=0
            ;;
        esac
        ;;
    esac

    return "${ret}"
}

_dpctl_init() {
    local -i ret=1
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '--passphrase-fd[Read the passphrase from this file descriptor (up to the first newline).]:n:'
        '--passphrase-file[Read the passphrase from this file (first line).]:path:'
        '--kdf-ops[Argon2id passes (default\: 3).]:n:'
        '--kdf-mem-mib[Argon2id memory in MiB (default\: calibrated so unlocking takes about --kdf-target-ms).]:mib:'
        '--kdf-target-ms[Calibration target for unlocking, in milliseconds.]:ms:'
        '--kdf-preset[A fixed preset instead of calibration\: interactive, moderate, sensitive, or minimum (tests only\: no protection against guessing).]:name:'
        '--binding[What binds the keys to this machine\: tpm2 (a key inside the TPM 2.0; an error if none answers), file (the device secret alone), or auto (tpm2 when a TPM answers, else file; says which).]:tpm2|file|auto:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_unlock() {
    local -i ret=1
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '--passphrase-fd[Read the passphrase from this file descriptor (up to the first newline).]:n:'
        '--passphrase-file[Read the passphrase from this file (first line).]:path:'
        '--timeout[Lock again automatically after this long\: 90, 90s, 15m, 2h.]:duration:'
        '--grace[With --timeout\: tell running apps `willLock` this long before the auto-lock\: 500ms (default), 2s, 0.]:duration:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_lock() {
    local -i ret=1
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '--evict-all[Also remove completeUntilFirstUserAuthentication (the analogue of a reboot).]'
        '--grace[Tell running apps `willLock` this long before locking\: 500ms (default), 2s, 10 (seconds; Apple gives about 10 s).]:duration:'
        '--now[Lock at once, without telling running apps `willLock` first.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_status() {
    local -i ret=1
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '--json[Print JSON for scripts.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_passwd() {
    local -i ret=1
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '--passphrase-fd[Read the passphrase from this file descriptor (up to the first newline).]:n:'
        '--passphrase-file[Read the passphrase from this file (first line).]:path:'
        '--new-passphrase-fd[Read the new passphrase from this file descriptor (may equal --passphrase-fd\: one line each).]:n:'
        '--new-passphrase-file[Read the new passphrase from this file (first line).]:path:'
        '--kdf-ops[Argon2id passes (default\: 3).]:n:'
        '--kdf-mem-mib[Argon2id memory in MiB (default\: calibrated so unlocking takes about --kdf-target-ms).]:mib:'
        '--kdf-target-ms[Calibration target for unlocking, in milliseconds.]:ms:'
        '--kdf-preset[A fixed preset instead of calibration\: interactive, moderate, sensitive, or minimum (tests only\: no protection against guessing).]:name:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_recover() {
    local -i ret=1
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '--recovery-key-fd[Read the recovery key from this file descriptor.]:n:'
        '--recovery-key-file[Read the recovery key from this file.]:path:'
        '--new-passphrase-fd[Read the new passphrase from this file descriptor (may equal --passphrase-fd\: one line each).]:n:'
        '--new-passphrase-file[Read the new passphrase from this file (first line).]:path:'
        '--kdf-ops[Argon2id passes (default\: 3).]:n:'
        '--kdf-mem-mib[Argon2id memory in MiB (default\: calibrated so unlocking takes about --kdf-target-ms).]:mib:'
        '--kdf-target-ms[Calibration target for unlocking, in milliseconds.]:ms:'
        '--kdf-preset[A fixed preset instead of calibration\: interactive, moderate, sensitive, or minimum (tests only\: no protection against guessing).]:name:'
        '--binding[The recovered domain'\''s binding\: tpm2 (a new key in this machine'\''s TPM) or file; default\: the kind it had.]:tpm2|file:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_bind() {
    local -i ret=1
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '--passphrase-fd[Read the passphrase from this file descriptor (up to the first newline).]:n:'
        '--passphrase-file[Read the passphrase from this file (first line).]:path:'
        '--binding[The new binding\: tpm2 (a key inside the TPM at --tpm-tcti; an error if none answers) or file.]:tpm2|file:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_rotate() {
    local -i ret=1
    local -ar ___class=('complete' 'completeUnlessOpen' 'completeUntilFirstUserAuthentication' 'none')
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '--passphrase-fd[Read the passphrase from this file descriptor (up to the first newline).]:n:'
        '--passphrase-file[Read the passphrase from this file (first line).]:path:'
        '--class[The class to rotate (complete, completeUnlessOpen, completeUntilFirstUserAuthentication, none, or A–D).]:class:{__dpctl_complete "${___class[@]}"}'
        '*:paths:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_wipe() {
    local -i ret=1
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '--yes[Do not ask for confirmation.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_put() {
    local -i ret=1
    local -ar ___class=('complete' 'completeUnlessOpen' 'completeUntilFirstUserAuthentication' 'none')
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '--class[Protection class (complete, completeUnlessOpen, completeUntilFirstUserAuthentication, none, or A–D).]:class:{__dpctl_complete "${___class[@]}"}'
        '--from[Read the plaintext from this file instead of standard input.]:path:'
        '--no-sync[Skip the fsyncs\: still atomic for readers, but a power failure soon after may leave the old file or one that fails authentication.]'
        ':path:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_cat() {
    local -i ret=1
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '*:paths:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_ls() {
    local -i ret=1
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '--json[Print JSON for scripts.]'
        '*:paths:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_protect() {
    local -i ret=1
    local -ar ___class=('complete' 'completeUnlessOpen' 'completeUntilFirstUserAuthentication' 'none')
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '--class[Protection class for the converted files.]:class:{__dpctl_complete "${___class[@]}"}'
        '*:paths:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_unprotect() {
    local -i ret=1
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '*:paths:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_set-class() {
    local -i ret=1
    local -ar ___class=('complete' 'completeUnlessOpen' 'completeUntilFirstUserAuthentication' 'none')
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '--class[The new protection class.]:class:{__dpctl_complete "${___class[@]}"}'
        '*:paths:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_repair() {
    local -i ret=1
    local -ar arg_specs=(
        '--home[The domain'\''s home directory (default\: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).]:dir:'
        '--tpm-tcti[The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default\: $DATAPROTECTION_TPM_TCTI or device\:/dev/tpmrm0).]:tcti:'
        '--log-level[Write the domain'\''s log at this level and above to standard error\: trace, debug, info, notice, warning, error, critical, off (default\: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.]:level:'
        '*:paths:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_backup-excludes() {
    local -i ret=1
    local -ar ___format=('restic' 'borg' 'rsync' 'tar')
    local -ar arg_specs=(
        '--format[restic, borg, rsync or tar.]:format:{__dpctl_complete "${___format[@]}"}'
        ':container:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_backup-list() {
    local -i ret=1
    local -ar arg_specs=(
        '--all[Also show the items left out, with the reason.]'
        ':container:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_purge() {
    local -i ret=1
    local -ar arg_specs=(
        '--until-free[Stop once the filesystem has more than this free (e.g. 500M, 2G).]:size:'
        '--wait[Wait for containers in use instead of skipping them.]'
        '*:containers:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_audit() {
    local -i ret=1
    local -ar arg_specs=(
        '--json[Print the findings as JSON (path, kind, directory, class, fix).]'
        '*:containers:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_bundle() {
    local -i ret=1
    local -ar arg_specs=(
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
        '(-): :->command'
        '(-)*:: :->arg'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0
    case "${state}" in
    command)
        local -ar subcommands=(
            'keygen:Make an Ed25519 signing key file (mode 0600); prints the public key.'
            'seal:Hash every file of the bundle into a signed manifest and make the bundle read-only.'
            'verify:Check the bundle against its seal; exits non-zero when it was tampered with.'
        )
        _describe -V subcommand subcommands && ret=0
        ;;
    arg)
        case "${words[1]}" in
        keygen|seal|verify)
            "_dpctl_bundle_${words[1]}" && ret=0
            ;;
        esac
        ;;
    esac

    return "${ret}"
}

_dpctl_bundle_keygen() {
    local -i ret=1
    local -ar arg_specs=(
        ':key-file:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_bundle_seal() {
    local -i ret=1
    local -ar arg_specs=(
        '--key[The signing key file (from `dpctl bundle keygen`).]:file:'
        ':container:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_bundle_verify() {
    local -i ret=1
    local -ar arg_specs=(
        '--public-key[The signer'\''s public key (64 hex digits) to trust.]:hex:'
        ':container:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_doctor() {
    local -i ret=1
    local -ar arg_specs=(
        '--domains[How many more domains this uid should be able to hold unlocked.]:n:'
        '--timeout[Count them as unlocked with --timeout (two keys each).]'
        '--json[Print JSON for scripts.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_dpctl_help() {
    local -i ret=1
    local -ar arg_specs=(
        '*:subcommands:'
        '--version[Show the version.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

if [[ "${funcstack[1]}" = _dpctl ]]; then
    _dpctl "${@}"
else
    compdef _dpctl dpctl
fi
