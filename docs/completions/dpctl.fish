function __dpctl_should_offer_completions_for_flags_or_options -a expected_commands
    set -l non_repeating_flags_or_options $argv[2..]
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __dpctl_parse_tokens
    test "$commands" = "$expected_commands"; and return $non_repeating_flags_or_options_absent
end

function __dpctl_should_offer_completions_for_positional -a expected_commands positional_index_comparison expected_positional_index
    set -l non_repeating_flags_or_options
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __dpctl_parse_tokens
    test "$commands" = "$expected_commands" -a \( "$positional_index" "$positional_index_comparison" "$expected_positional_index" \)
end

function __dpctl_parse_tokens -S
    set -l unparsed_tokens (__dpctl_tokens -pc)
    switch $unparsed_tokens[1]
    case 'dpctl'
        __dpctl_parse_subcommand 0 'version' 'h/help'
        switch $unparsed_tokens[1]
        case 'init'
            __dpctl_parse_subcommand 0 'home=' 'tpm-tcti=' 'log-level=' 'passphrase-fd=' 'passphrase-file=' 'kdf-ops=' 'kdf-mem-mib=' 'kdf-target-ms=' 'kdf-preset=' 'binding=' 'version' 'h/help'
        case 'unlock'
            __dpctl_parse_subcommand 0 'home=' 'tpm-tcti=' 'log-level=' 'passphrase-fd=' 'passphrase-file=' 'timeout=' 'grace=' 'version' 'h/help'
        case 'lock'
            __dpctl_parse_subcommand 0 'home=' 'tpm-tcti=' 'log-level=' 'evict-all' 'grace=' 'now' 'version' 'h/help'
        case 'status'
            __dpctl_parse_subcommand 0 'home=' 'tpm-tcti=' 'log-level=' 'json' 'version' 'h/help'
        case 'passwd'
            __dpctl_parse_subcommand 0 'home=' 'tpm-tcti=' 'log-level=' 'passphrase-fd=' 'passphrase-file=' 'new-passphrase-fd=' 'new-passphrase-file=' 'kdf-ops=' 'kdf-mem-mib=' 'kdf-target-ms=' 'kdf-preset=' 'version' 'h/help'
        case 'recover'
            __dpctl_parse_subcommand 0 'home=' 'tpm-tcti=' 'log-level=' 'recovery-key-fd=' 'recovery-key-file=' 'new-passphrase-fd=' 'new-passphrase-file=' 'kdf-ops=' 'kdf-mem-mib=' 'kdf-target-ms=' 'kdf-preset=' 'binding=' 'version' 'h/help'
        case 'bind'
            __dpctl_parse_subcommand 0 'home=' 'tpm-tcti=' 'log-level=' 'passphrase-fd=' 'passphrase-file=' 'binding=' 'version' 'h/help'
        case 'rotate'
            __dpctl_parse_subcommand -r 1 'home=' 'tpm-tcti=' 'log-level=' 'passphrase-fd=' 'passphrase-file=' 'class=' 'version' 'h/help'
        case 'wipe'
            __dpctl_parse_subcommand 0 'home=' 'tpm-tcti=' 'log-level=' 'yes' 'version' 'h/help'
        case 'put'
            __dpctl_parse_subcommand 1 'home=' 'tpm-tcti=' 'log-level=' 'class=' 'from=' 'no-sync' 'version' 'h/help'
        case 'cat'
            __dpctl_parse_subcommand -r 1 'home=' 'tpm-tcti=' 'log-level=' 'version' 'h/help'
        case 'ls'
            __dpctl_parse_subcommand -r 1 'home=' 'tpm-tcti=' 'log-level=' 'json' 'version' 'h/help'
        case 'protect'
            __dpctl_parse_subcommand -r 1 'home=' 'tpm-tcti=' 'log-level=' 'class=' 'version' 'h/help'
        case 'unprotect'
            __dpctl_parse_subcommand -r 1 'home=' 'tpm-tcti=' 'log-level=' 'version' 'h/help'
        case 'set-class'
            __dpctl_parse_subcommand -r 1 'home=' 'tpm-tcti=' 'log-level=' 'class=' 'version' 'h/help'
        case 'repair'
            __dpctl_parse_subcommand -r 1 'home=' 'tpm-tcti=' 'log-level=' 'version' 'h/help'
        case 'backup-excludes'
            __dpctl_parse_subcommand 1 'format=' 'version' 'h/help'
        case 'backup-list'
            __dpctl_parse_subcommand 1 'all' 'version' 'h/help'
        case 'purge'
            __dpctl_parse_subcommand -r 1 'until-free=' 'wait' 'version' 'h/help'
        case 'audit'
            __dpctl_parse_subcommand -r 1 'json' 'version' 'h/help'
        case 'bundle'
            __dpctl_parse_subcommand 0 'version' 'h/help'
            switch $unparsed_tokens[1]
            case 'keygen'
                __dpctl_parse_subcommand 1 'version' 'h/help'
            case 'seal'
                __dpctl_parse_subcommand 1 'key=' 'version' 'h/help'
            case 'verify'
                __dpctl_parse_subcommand 1 'public-key=' 'version' 'h/help'
            end
        case 'doctor'
            __dpctl_parse_subcommand 0 'domains=' 'timeout' 'json' 'version' 'h/help'
        case 'help'
            __dpctl_parse_subcommand -r 1 'version'
        end
    end
end

function __dpctl_tokens
    if test (string split -m 1 -f 1 -- . "$FISH_VERSION") -gt 3
        commandline --tokens-raw $argv
    else
        commandline -o $argv
    end
end

function __dpctl_parse_subcommand -S -a positional_count
    argparse -s r -- $argv
    set -l option_specs $argv[2..]
    set -l is_repeating_positional $_flag_r
    set -el _flag_r
    set -a commands $unparsed_tokens[1]
    set positional_index 0
    while true
        set -e unparsed_tokens[1]
        argparse -sn "$commands" $option_specs -- $unparsed_tokens 2> /dev/null
        set unparsed_tokens $argv
        set positional_index (math $positional_index + 1)
        for non_repeating_flag_or_option in $non_repeating_flags_or_options
            if set -ql "_flag_$(string replace -a - _ -- $non_repeating_flag_or_option)"
                set non_repeating_flags_or_options_absent 1
                break
            end
        end
        test (count $unparsed_tokens) -eq 0 -o \( -z "$is_repeating_positional" -a "$positional_index" -gt "$positional_count" \) && break
    end
end

function __dpctl_complete_directories
    set -l token (commandline -t)
    string match -- '*/' $token
    set -l subdirs $token*/
    printf %s\n $subdirs
end

function __dpctl_custom_completion
    set -x SAP_SHELL fish
    set -x SAP_SHELL_VERSION $FISH_VERSION
    set -l tokens (__dpctl_tokens -p)
    if test -z "$(__dpctl_tokens -t)"
        set -l index (count (__dpctl_tokens -pc))
        set tokens $tokens[..$index] \'\' $tokens[(math $index + 1)..]
    end
    command $tokens[1] $argv $tokens
end

complete -c 'dpctl' -f
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'init' -d 'Create a protection domain: device secret, class keys, keybag. Prints the recovery key once.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'unlock' -d 'Unlock the domain: the passphrase\'s class keys go into the kernel keyring.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'lock' -d 'Lock the domain: remove classes complete and completeUnlessOpen from the keyring.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'status' -d 'Show the lock state of each class, the auto-lock deadline and the keyring key ids.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'passwd' -d 'Change the passphrase (rewraps the class keys only: the same cost for 10 or 10,000 files).'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'recover' -d 'Restore access with the recovery key: sets a new passphrase and a new device secret.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'bind' -d 'Bind an existing domain to this machine\'s TPM 2.0 (--binding tpm2), or back to the device secret file alone (--binding file).'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'rotate' -d 'Rotate a class key: new generation, per-file keys rewrapped header by header (contents are not re-encrypted).'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'wipe' -d 'Crypto-shred the domain: destroy its keybag and device secret so every protected file is unreadable at once.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'put' -d 'Write standard input (or --from FILE) to a protected file, atomically.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'cat' -d 'Write the plaintext of protected files to standard output.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'ls' -d 'List protected files: class, plaintext size, key generation, content type (no key needed).'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'protect' -d 'Convert ordinary files (or whole trees) into protected files in place, each atomically; a SQLite database with its journal and WAL as one unit.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'unprotect' -d 'Convert protected files (or whole trees) back into ordinary files in place, each atomically; a database with its journal and WAL as one unit.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'set-class' -d 'Move protected files to another class by rewrapping their per-file keys (headers only).'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'repair' -d 'Finish what a crash interrupted: roll journals back (or forward) and remove dead writers\' temporary files.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'backup-excludes' -d 'Print the exclude list of a container for restic, borg, rsync or GNU tar.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'backup-list' -d 'Show what a backup of a container holds, with sizes (ciphertext bytes).'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'purge' -d 'Delete what containers hold in tmp and Library/Caches, oldest first.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'audit' -d 'List files left plaintext where a container\'s policy expects protection; exits 3 when it finds any.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'bundle' -d 'Seal a container\'s read-only bundle, and verify the seal.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'doctor' -d 'Check the kernel keyring and this uid\'s key quota; say which sysctl to raise, and to what, for N more unlocked domains.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl" -eq 1' -fa 'help' -d 'Show subcommand help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl init" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl init" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl init" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl init" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this file descriptor (up to the first newline).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl init" passphrase-file' -l 'passphrase-file' -d 'Read the passphrase from this file (first line).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl init" kdf-ops' -l 'kdf-ops' -d 'Argon2id passes (default: 3).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl init" kdf-mem-mib' -l 'kdf-mem-mib' -d 'Argon2id memory in MiB (default: calibrated so unlocking takes about --kdf-target-ms).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl init" kdf-target-ms' -l 'kdf-target-ms' -d 'Calibration target for unlocking, in milliseconds.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl init" kdf-preset' -l 'kdf-preset' -d 'A fixed preset instead of calibration: interactive, moderate, sensitive, or minimum (tests only: no protection against guessing).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl init" binding' -l 'binding' -d 'What binds the keys to this machine: tpm2 (a key inside the TPM 2.0; an error if none answers), file (the device secret alone), or auto (tpm2 when a TPM answers, else file; says which).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl init" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl init" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl unlock" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl unlock" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl unlock" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl unlock" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this file descriptor (up to the first newline).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl unlock" passphrase-file' -l 'passphrase-file' -d 'Read the passphrase from this file (first line).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl unlock" timeout' -l 'timeout' -d 'Lock again automatically after this long: 90, 90s, 15m, 2h.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl unlock" grace' -l 'grace' -d 'With --timeout: tell running apps `willLock` this long before the auto-lock: 500ms (default), 2s, 0.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl unlock" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl unlock" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl lock" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl lock" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl lock" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl lock" evict-all' -l 'evict-all' -d 'Also remove completeUntilFirstUserAuthentication (the analogue of a reboot).'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl lock" grace' -l 'grace' -d 'Tell running apps `willLock` this long before locking: 500ms (default), 2s, 10 (seconds; Apple gives about 10 s).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl lock" now' -l 'now' -d 'Lock at once, without telling running apps `willLock` first.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl lock" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl lock" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl status" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl status" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl status" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl status" json' -l 'json' -d 'Print JSON for scripts.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl status" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl status" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl passwd" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl passwd" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl passwd" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl passwd" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this file descriptor (up to the first newline).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl passwd" passphrase-file' -l 'passphrase-file' -d 'Read the passphrase from this file (first line).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl passwd" new-passphrase-fd' -l 'new-passphrase-fd' -d 'Read the new passphrase from this file descriptor (may equal --passphrase-fd: one line each).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl passwd" new-passphrase-file' -l 'new-passphrase-file' -d 'Read the new passphrase from this file (first line).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl passwd" kdf-ops' -l 'kdf-ops' -d 'Argon2id passes (default: 3).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl passwd" kdf-mem-mib' -l 'kdf-mem-mib' -d 'Argon2id memory in MiB (default: calibrated so unlocking takes about --kdf-target-ms).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl passwd" kdf-target-ms' -l 'kdf-target-ms' -d 'Calibration target for unlocking, in milliseconds.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl passwd" kdf-preset' -l 'kdf-preset' -d 'A fixed preset instead of calibration: interactive, moderate, sensitive, or minimum (tests only: no protection against guessing).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl passwd" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl passwd" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl recover" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl recover" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl recover" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl recover" recovery-key-fd' -l 'recovery-key-fd' -d 'Read the recovery key from this file descriptor.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl recover" recovery-key-file' -l 'recovery-key-file' -d 'Read the recovery key from this file.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl recover" new-passphrase-fd' -l 'new-passphrase-fd' -d 'Read the new passphrase from this file descriptor (may equal --passphrase-fd: one line each).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl recover" new-passphrase-file' -l 'new-passphrase-file' -d 'Read the new passphrase from this file (first line).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl recover" kdf-ops' -l 'kdf-ops' -d 'Argon2id passes (default: 3).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl recover" kdf-mem-mib' -l 'kdf-mem-mib' -d 'Argon2id memory in MiB (default: calibrated so unlocking takes about --kdf-target-ms).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl recover" kdf-target-ms' -l 'kdf-target-ms' -d 'Calibration target for unlocking, in milliseconds.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl recover" kdf-preset' -l 'kdf-preset' -d 'A fixed preset instead of calibration: interactive, moderate, sensitive, or minimum (tests only: no protection against guessing).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl recover" binding' -l 'binding' -d 'The recovered domain\'s binding: tpm2 (a new key in this machine\'s TPM) or file; default: the kind it had.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl recover" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl recover" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bind" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bind" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bind" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bind" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this file descriptor (up to the first newline).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bind" passphrase-file' -l 'passphrase-file' -d 'Read the passphrase from this file (first line).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bind" binding' -l 'binding' -d 'The new binding: tpm2 (a key inside the TPM at --tpm-tcti; an error if none answers) or file.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bind" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bind" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl rotate" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl rotate" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl rotate" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl rotate" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this file descriptor (up to the first newline).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl rotate" passphrase-file' -l 'passphrase-file' -d 'Read the passphrase from this file (first line).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl rotate" class' -l 'class' -d 'The class to rotate (complete, completeUnlessOpen, completeUntilFirstUserAuthentication, none, or A–D).' -rfka 'complete completeUnlessOpen completeUntilFirstUserAuthentication none'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl rotate" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl rotate" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl wipe" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl wipe" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl wipe" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl wipe" yes' -l 'yes' -d 'Do not ask for confirmation.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl wipe" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl wipe" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl put" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl put" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl put" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl put" class' -l 'class' -d 'Protection class (complete, completeUnlessOpen, completeUntilFirstUserAuthentication, none, or A–D).' -rfka 'complete completeUnlessOpen completeUntilFirstUserAuthentication none'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl put" from' -l 'from' -d 'Read the plaintext from this file instead of standard input.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl put" no-sync' -l 'no-sync' -d 'Skip the fsyncs: still atomic for readers, but a power failure soon after may leave the old file or one that fails authentication.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl put" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl put" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl cat" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl cat" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl cat" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl cat" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl cat" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl ls" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl ls" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl ls" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl ls" json' -l 'json' -d 'Print JSON for scripts.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl ls" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl ls" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl protect" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl protect" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl protect" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl protect" class' -l 'class' -d 'Protection class for the converted files.' -rfka 'complete completeUnlessOpen completeUntilFirstUserAuthentication none'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl protect" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl protect" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl unprotect" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl unprotect" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl unprotect" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl unprotect" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl unprotect" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl set-class" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl set-class" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl set-class" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl set-class" class' -l 'class' -d 'The new protection class.' -rfka 'complete completeUnlessOpen completeUntilFirstUserAuthentication none'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl set-class" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl set-class" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl repair" home' -l 'home' -d 'The domain\'s home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl repair" tpm-tcti' -l 'tpm-tcti' -d 'The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl repair" log-level' -l 'log-level' -d 'Write the domain\'s log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl repair" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl repair" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl backup-excludes" format' -l 'format' -d 'restic, borg, rsync or tar.' -rfka 'restic borg rsync tar'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl backup-excludes" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl backup-excludes" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl backup-list" all' -l 'all' -d 'Also show the items left out, with the reason.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl backup-list" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl backup-list" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl purge" until-free' -l 'until-free' -d 'Stop once the filesystem has more than this free (e.g. 500M, 2G).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl purge" wait' -l 'wait' -d 'Wait for containers in use instead of skipping them.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl purge" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl purge" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl audit" json' -l 'json' -d 'Print the findings as JSON (path, kind, directory, class, fix).'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl audit" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl audit" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bundle" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bundle" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl bundle" -eq 1' -fa 'keygen' -d 'Make an Ed25519 signing key file (mode 0600); prints the public key.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl bundle" -eq 1' -fa 'seal' -d 'Hash every file of the bundle into a signed manifest and make the bundle read-only.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_positional "dpctl bundle" -eq 1' -fa 'verify' -d 'Check the bundle against its seal; exits non-zero when it was tampered with.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bundle keygen" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bundle keygen" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bundle seal" key' -l 'key' -d 'The signing key file (from `dpctl bundle keygen`).' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bundle seal" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bundle seal" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bundle verify" public-key' -l 'public-key' -d 'The signer\'s public key (64 hex digits) to trust.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bundle verify" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl bundle verify" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl doctor" domains' -l 'domains' -d 'How many more domains this uid should be able to hold unlocked.' -rfka ''
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl doctor" timeout' -l 'timeout' -d 'Count them as unlocked with --timeout (two keys each).'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl doctor" json' -l 'json' -d 'Print JSON for scripts.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl doctor" version' -l 'version' -d 'Show the version.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl doctor" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'dpctl' -n '__dpctl_should_offer_completions_for_flags_or_options "dpctl help" version' -l 'version' -d 'Show the version.'
