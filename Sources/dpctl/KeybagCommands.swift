import ArgumentParser
import DataProtection
import DataProtectionSQLite
import Foundation
import ProtectionCrypto

/// `dpctl passwd`.
struct Passwd: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change the passphrase (rewraps the class keys only: the same cost for 10 or 10,000 files).")
    @OptionGroup var domain: DomainOptions
    @OptionGroup var passphrase: PassphraseOptions
    @OptionGroup var newPassphrase: NewPassphraseOptions
    @OptionGroup var kdf: KDFOptions

    func run() throws {
        let d = try domain.open()
        let old = try passphrase.source.read()
        let new = try newPassphrase.source.read(confirm: true)
        try d.changePassphrase(old: old, new: new, kdf: try kdf.parameters(keepIfUnset: true))
        note("passphrase changed")
    }
}

/// `dpctl recover`.
struct Recover: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Restore access with the recovery key: sets a new passphrase and a new device secret.",
        discussion: "Use it after forgetting the passphrase, or to open a copy of the domain's home on another machine (the device secret stays behind). Files remain readable: the class keys do not change.")
    @OptionGroup var domain: DomainOptions
    @Option(name: .customLong("recovery-key-fd"), help: ArgumentHelp("Read the recovery key from this file descriptor.", valueName: "n"))
    var keyFD: Int32?
    @Option(name: .customLong("recovery-key-file"), help: ArgumentHelp("Read the recovery key from this file.", valueName: "path"))
    var keyFile: String?
    @OptionGroup var newPassphrase: NewPassphraseOptions
    @OptionGroup var kdf: KDFOptions
    @Option(help: ArgumentHelp("The recovered domain's binding: tpm2 (a new key in this machine's TPM) or file; default: the kind it had.", valueName: "tpm2|file"))
    var binding: String?

    func run() throws {
        let location = try domain.location()
        let chosen = try binding.map { try Init.choose($0, tcti: location.tpmTCTI, auto: false) }
        let text = try SecretSource(fd: keyFD, file: keyFile, name: "recovery key", fdOption: "recovery-key-fd", fileOption: "recovery-key-file").read()
        let key = try RecoveryKey(text: text)
        let new = try newPassphrase.source.read(confirm: true)
        // Calibrated afresh by default: this may be a new machine, and on this path the stored
        // parameters are not authenticated (no device secret yet), so they are not trusted.
        _ = try ProtectionDomain.recover(at: location, recoveryKey: key, newPassphrase: new, kdf: try kdf.parameters(keepIfUnset: false), binding: chosen, keyStore: try domain.keyStore(), logger: try domain.logger())
        note("recovered: new device secret and passphrase set; now run `dpctl\(Failure.homeArgument) unlock`")
    }
}

/// `dpctl rotate`.
struct Rotate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rotate a class key: new generation, per-file keys rewrapped header by header (contents are not re-encrypted).",
        discussion: "Lists every protected file of the class under PATH… and rewraps it. Resumable: if interrupted, run it again (the journal in the home remembers the files). When every file is done the old generation is destroyed, so files of the class outside PATH… become unreadable: name every directory that holds them. A database is rotated with its journal and WAL while no connection holds it; one in use is refused before anything changes.")
    @OptionGroup var domain: DomainOptions
    @OptionGroup var passphrase: PassphraseOptions
    @Option(name: .customLong("class"), help: "The class to rotate (complete, completeUnlessOpen, completeUntilFirstUserAuthentication, none, or A–D).")
    var protectionClass: ProtectionClass
    @Argument(help: "Files and directories holding the class's protected files.")
    var paths: [String] = []

    func run() throws {
        let d = try domain.open()
        let secret = try passphrase.source.read()
        let bar = ProgressBar(label: "rotating \(protectionClass.name)")
        // Each database of the class under PATH… is held (SQLite's exclusive lock) for the whole rotation: one in use is refused.
        let r = try DatabaseUnit.rotate(protectionClass, paths: paths, domain: d, passphrase: secret) { p in
            bar.update(done: p.done, total: p.total)
            return true
        }
        bar.finish()
        note("rotated \(r.protectionClass.name): generation \(r.from.map(String.init).joined(separator: ",")) → \(r.to); \(r.rewrapped) files rewrapped\(r.missing > 0 ? ", \(r.missing) listed files no longer exist" : "")\(r.resumed ? " (resumed an interrupted rotation)" : "")")
    }
}

/// `dpctl wipe`.
struct Wipe: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Crypto-shred the domain: destroy its keybag and device secret so every protected file is unreadable at once.")
    @OptionGroup var domain: DomainOptions
    @Flag(help: "Do not ask for confirmation.") var yes = false

    func run() throws {
        let d = try domain.open()
        if !yes {
            let tty = open("/dev/tty", O_RDWR | O_CLOEXEC)
            guard tty >= 0 else {
                throw CLIError(exit: .usage, message: "wipe needs confirmation and there is no terminal to ask", hint: "add --yes to confirm in a script")
            }
            defer { close(tty) }
            let prompt = "This destroys the keybag and device secret of '\(d.location.home)': every protected file of the domain becomes unreadable, for good. Type 'wipe' to confirm: "
            _ = prompt.withCString { write(tty, $0, strlen($0)) }
            var answer = [UInt8](repeating: 0, count: 16)
            let n = read(tty, &answer, answer.count)
            guard n >= 4, Array(answer[0..<4]) == Array("wipe".utf8) else {
                throw CLIError(exit: .declined, message: "not confirmed; nothing was destroyed", hint: nil)
            }
        }
        try d.wipe()
        note("wiped: the keybag and device secret of domain \(d.id) are destroyed")
    }
}
