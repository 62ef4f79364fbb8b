import ArgumentParser
import DataProtection
import Foundation
import ProtectionCrypto

/// The root command: subcommands, and the exit-code table in `--help`.
struct Dpctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dpctl",
        abstract: "Apple-style Data Protection for files on Linux: lock, unlock and use a protection domain.",
        discussion: """
            A protection domain is what one passphrase unlocks. Its home holds the keybag \
            (--home, else $DATAPROTECTION_HOME, else $XDG_DATA_HOME/dataprotection, else \
            ~/.local/share/dataprotection); its device secret lives apart, in \
            $DATAPROTECTION_DEVICE_DIR, else $XDG_STATE_HOME/dataprotection/devices, else \
            ~/.local/state/dataprotection/devices. While unlocked, class keys live in the kernel \
            keyring under @u ($DATAPROTECTION_KEYRING=session uses @s instead).

            Classes: complete (A), completeUnlessOpen (B), completeUntilFirstUserAuthentication (C), none (D). \
            `lock` removes A and B; `lock --evict-all` also C; D is always available.

            Exit codes:
            \(Exit.table)
            """,
        version: DataProtectionRelease.summary,
        subcommands: [
            Init.self, Unlock.self, Lock.self, Status.self, Passwd.self, Recover.self, Bind.self, Rotate.self, Wipe.self,
            Put.self, Cat.self, List.self, Protect.self, Unprotect.self, SetClass.self, Repair.self,
            BackupExcludes.self, BackupList.self, PurgeCommand.self, AuditCommand.self, BundleCommand.self, Doctor.self,
        ])
}

/// `--home`, `--tpm-tcti` and `--log-level`, shared by every command.
struct DomainOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The domain's home directory (default: $DATAPROTECTION_HOME or ~/.local/share/dataprotection).", valueName: "dir"))
    var home: String?
    @Option(name: .customLong("tpm-tcti"), help: ArgumentHelp("The TPM 2.0 of a TPM-bound domain, as a tpm2-tss TCTI (default: $DATAPROTECTION_TPM_TCTI or device:/dev/tpmrm0).", valueName: "tcti"))
    var tpmTCTI: String?
    @Option(name: .customLong("log-level"), help: ArgumentHelp("Write the domain's log at this level and above to standard error: trace, debug, info, notice, warning, error, critical, off (default: $DP_LOG_LEVEL, else off). Never contains keys, passphrases or plaintext.", valueName: "level"))
    var logLevel: String?

    /// Where the domain is, by the documented defaults, and the TPM that `--tpm-tcti` names.
    func location() throws -> DomainLocation {
        if let home { Failure.homeArgument = " --home '\(home)'" }
        var l = try DomainLocation.resolve(home: home, environment: ProcessInfo.processInfo.environment)
        if let tpmTCTI, !tpmTCTI.isEmpty { l.tpmTCTI = tpmTCTI }
        return l
    }

    /// The key store: the kernel keyring under `$DATAPROTECTION_KEYRING` (user or session).
    func keyStore() throws -> KeyStore {
        .kernel(try KeyringParent.from(environment: ProcessInfo.processInfo.environment))
    }

    /// Opens the domain at the resolved home.
    func open() throws -> ProtectionDomain {
        try ProtectionDomain.open(at: try location(), keyStore: try keyStore(), logger: try logger())
    }
}

/// Argon2id options for `init`, `passwd` and `recover`.
struct KDFOptions: ParsableArguments {
    @Option(name: .customLong("kdf-ops"), help: ArgumentHelp("Argon2id passes (default: 3).", valueName: "n"))
    var ops: UInt64?
    @Option(name: .customLong("kdf-mem-mib"), help: ArgumentHelp("Argon2id memory in MiB (default: calibrated so unlocking takes about --kdf-target-ms).", valueName: "mib"))
    var memMiB: UInt64?
    @Option(name: .customLong("kdf-target-ms"), help: ArgumentHelp("Calibration target for unlocking, in milliseconds.", valueName: "ms"))
    var targetMS: Int = 500
    @Option(name: .customLong("kdf-preset"), help: ArgumentHelp("A fixed preset instead of calibration: interactive, moderate, sensitive, or minimum (tests only: no protection against guessing).", valueName: "name"))
    var preset: String?

    /// The parameters: a preset, explicit values, or a calibration; nil when `keepIfUnset` and nothing was asked.
    func parameters(keepIfUnset: Bool) throws -> Argon2Parameters? {
        if let preset {
            switch preset {
            case "interactive": return .interactive
            case "moderate": return .moderate
            case "sensitive": return .sensitive
            case "minimum": return .minimumForTests
            default: throw CLIError(exit: .usage, message: "unknown --kdf-preset '\(preset)'", hint: "use interactive, moderate, sensitive or minimum")
            }
        }
        if ops == nil && memMiB == nil && keepIfUnset { return nil }
        var p = (ops == nil || memMiB == nil) ? try ProtectionDomain.calibrateKDF(target: .milliseconds(targetMS)) : Argon2Parameters(opsLimit: 3, memLimit: 0)
        if let ops { p.opsLimit = ops }
        if let memMiB { p.memLimit = memMiB << 20 }
        guard p.isValid else { throw CLIError(exit: .usage, message: "Argon2id parameters out of range (ops \(p.opsLimit), memory \(p.memLimit >> 20) MiB)", hint: "use --kdf-ops 1… and --kdf-mem-mib 1…4096") }
        return p
    }
}

/// A protection class given on the command line: a name (`complete`), a letter (`A`) or a short form.
extension ProtectionClass: ExpressibleByArgument {
    public init?(argument: String) { self.init(name: argument) }
    public static var allValueStrings: [String] { allCases.map(\.name) }
}

/// Writes to standard error (progress, notes), never to standard output.
func note(_ s: String) { FileHandle.standardError.write(Data((s + "\n").utf8)) }
