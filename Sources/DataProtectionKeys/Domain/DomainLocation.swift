import ProtectionCrypto
internal import PathSyntax

/// Where a protection domain keeps its files: its home (keybag, rotation journal) and its device-secret directory.
///
/// The device secret lives outside the home on purpose: copying the home
/// alone (a backup, a synced folder, a stolen container) does not give an
/// attacker what is needed to test passphrase guesses offline.
public struct DomainLocation: Sendable, Equatable {
    /// The domain's home directory.
    public var home: String
    /// The directory holding `<domainID>.secret` files (0700, owner-only).
    public var deviceDirectory: String
    /// The TCTI of the TPM 2.0 a TPM-bound domain's keybag needs (`device:/dev/tpmrm0` unless told otherwise).
    public var tpmTCTI: String

    /// The kernel's resource-managed TPM device: where a machine's TPM 2.0 answers.
    public static let defaultTPMTCTI = "device:/dev/tpmrm0"

    /// A location from explicit directories (`resolve(home:environment:)` applies the defaults).
    /// - Parameters:
    ///   - home: the domain's home directory (keybag, rotation journal).
    ///   - deviceDirectory: the directory of device secrets, outside the home.
    ///   - tpmTCTI: how to reach the TPM for a TPM-bound domain (tpm2-tss TCTI string: `device:/dev/tpmrm0`,
    ///     `swtpm:host=127.0.0.1,port=2321`).
    public init(home: String, deviceDirectory: String, tpmTCTI: String = DomainLocation.defaultTPMTCTI) {
        self.home = home
        self.deviceDirectory = deviceDirectory
        self.tpmTCTI = tpmTCTI
    }

    /// The keybag file.
    public var keybagPath: String { home + "/keybag" }
    /// The rotation journal, present only while a class-key rotation is unfinished.
    public var journalPath: String { home + "/rotation.journal" }
    /// The device-secret file of domain `id`.
    public func deviceSecretPath(_ id: DomainID) -> String { deviceDirectory + "/\(id).secret" }

    /// Resolves the documented defaults.
    ///
    /// Home: `home`, else `$DATAPROTECTION_HOME`, else `$XDG_DATA_HOME/dataprotection`,
    /// else `~/.local/share/dataprotection`. Device directory: `$DATAPROTECTION_DEVICE_DIR`,
    /// else `$XDG_STATE_HOME/dataprotection/devices`, else `~/.local/state/dataprotection/devices`.
    /// TPM: `$DATAPROTECTION_TPM_TCTI`, else `device:/dev/tpmrm0`.
    /// - Parameters:
    ///   - home: an explicit home (`dpctl --home`), which wins over the environment.
    ///   - environment: the process environment (passed in, never read globally here).
    /// - Throws: `.invalidArgument` when a default is needed and `HOME` is unset.
    public static func resolve(home: String? = nil, environment: [String: String]) throws(ProtectionError) -> DomainLocation {
        func nonEmpty(_ k: String) -> String? { environment[k].flatMap { $0.isEmpty ? nil : $0 } }
        func userHome() throws(ProtectionError) -> String {
            guard let h = nonEmpty("HOME") else {
                throw ProtectionError(.invalidArgument, "HOME is not set, so there is no default domain location; pass --home DIR or set DATAPROTECTION_HOME and DATAPROTECTION_DEVICE_DIR")
            }
            return h
        }
        let h: String
        if let home, !home.isEmpty { h = home }
        else if let e = nonEmpty("DATAPROTECTION_HOME") { h = e }
        else if let x = nonEmpty("XDG_DATA_HOME") { h = x + "/dataprotection" }
        else { h = try userHome() + "/.local/share/dataprotection" }
        let d: String
        if let e = nonEmpty("DATAPROTECTION_DEVICE_DIR") { d = e }
        else if let x = nonEmpty("XDG_STATE_HOME") { d = x + "/dataprotection/devices" }
        else { d = try userHome() + "/.local/state/dataprotection/devices" }
        return DomainLocation(home: trimmed(h), deviceDirectory: trimmed(d), tpmTCTI: nonEmpty("DATAPROTECTION_TPM_TCTI") ?? defaultTPMTCTI)
    }

    private static func trimmed(_ p: String) -> String { droppingTrailingSeparators(p) }
}
