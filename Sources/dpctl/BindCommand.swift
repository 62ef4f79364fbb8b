import ArgumentParser
import DataProtection
import Foundation

/// `dpctl bind`: binds an existing domain's keys to this machine's TPM 2.0, or back to the device secret file alone.
struct Bind: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Bind an existing domain to this machine's TPM 2.0 (--binding tpm2), or back to the device secret file alone (--binding file).",
        discussion: "Needs the passphrase. Rewraps the passphrase classes and replaces the keybag in one atomic write: files, the passphrase and the recovery key stay the same. Copies of the keybag made before keep their old binding (rotate the class keys to retire them).")
    @OptionGroup var domain: DomainOptions
    @OptionGroup var passphrase: PassphraseOptions
    @Option(help: ArgumentHelp("The new binding: tpm2 (a key inside the TPM at --tpm-tcti; an error if none answers) or file.", valueName: "tpm2|file"))
    var binding = "tpm2"

    func run() throws {
        let location = try domain.location()
        let wanted = try Init.choose(binding, tcti: location.tpmTCTI, auto: false)
        let d = try ProtectionDomain.open(at: location, keyStore: try domain.keyStore(), logger: try domain.logger())
        let secret = try passphrase.source.read()
        let previous = try d.bind(wanted, passphrase: secret)
        let described = wanted == .file ? "\(wanted)" : "\(wanted) at '\(location.tpmTCTI)'"
        if (previous == .file) == (wanted == .file) {
            note("already bound: \(described); nothing changed")
        } else {
            note("bound: \(described) (was \(previous)); the passphrase, the recovery key and every file are unchanged")
        }
    }
}
