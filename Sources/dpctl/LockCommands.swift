import ArgumentParser
import DataProtection
import Foundation
import ProtectionCrypto

/// `dpctl init`: creates a domain and shows its recovery key once.
struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a protection domain: device secret, class keys, keybag. Prints the recovery key once.",
        discussion: "The recovery key goes to standard output (alone on its line), the explanation to standard error, so `dpctl init > key.txt` captures just the key. Store it offline: it unlocks the domain without the passphrase and the device secret.")
    @OptionGroup var domain: DomainOptions
    @OptionGroup var passphrase: PassphraseOptions
    @OptionGroup var kdf: KDFOptions
    @Option(help: ArgumentHelp("What binds the keys to this machine: tpm2 (a key inside the TPM 2.0; an error if none answers), file (the device secret alone), or auto (tpm2 when a TPM answers, else file; says which).", valueName: "tpm2|file|auto"))
    var binding = "file"

    func run() throws {
        let location = try domain.location()
        let chosen = try Self.choose(binding, tcti: location.tpmTCTI)
        let described = chosen == .file ? "\(chosen)" : "\(chosen) at '\(location.tpmTCTI)'"
        let secret = try passphrase.source.read(confirm: true)
        let params = try kdf.parameters(keepIfUnset: false)!
        _ = try ProtectionDomain.create(at: location, passphrase: secret, kdf: params, keyStore: try domain.keyStore(), binding: chosen, logger: try domain.logger()) { (key) throws(ProtectionError) in
            note("Created the protection domain at '\(location.home)' (Argon2id: \(params.opsLimit) passes, \(params.memLimit >= 1 << 20 ? "\(params.memLimit >> 20) MiB" : "\(params.memLimit >> 10) KiB"); binding: \(described)).")
            note("Recovery key (shown only now; store it offline — it unlocks this domain without the passphrase):")
            let shown: Bool
            do { shown = try key.withText { text in writeAll(1, text) && [UInt8(10)].withUnsafeBytes { writeAll(1, $0) } } } catch {
                throw ProtectionError(.io(EIO), "unable to show the recovery key: \(error)")
            }
            guard shown else { throw ProtectionError(.io(EIO), "unable to write the recovery key to standard output; run `dpctl wipe --yes` and `dpctl init` again") }
            note("Next: `dpctl\(Failure.homeArgument) unlock`")
        }
    }

    /// The binding `--binding` asks for: `auto` is tpm2 when a TPM answers at `tcti` (else file, said on stderr);
    /// `tpm2` is never replaced by file (create fails when the TPM does not answer).
    /// - Parameter auto: whether `auto` is allowed (init); `bind` and `recover` need a binding named.
    static func choose(_ binding: String, tcti: String, auto: Bool = true) throws -> KeyBinding {
        switch binding {
        case "auto" where !auto: throw CLIError(exit: .usage, message: "--binding auto is for init", hint: "use --binding tpm2 or --binding file")
        case "tpm2": return .tpm2(tcti: tcti)
        case "file": return .file
        case "auto":
            let probe = Result { () throws(ProtectionError) in try KeyBinding.probeTPM(tcti: tcti) }
            if case .failure(let e) = probe, e.code == .tpmUnavailable {
                note("No TPM answers at '\(tcti)'; binding to the device secret file alone (no hardware binding).")
                return .file
            }
            try probe.get()
            return .tpm2(tcti: tcti)
        default: throw CLIError(exit: .usage, message: "unknown --binding '\(binding)'", hint: "use tpm2, file or auto")
        }
    }
}

/// `dpctl unlock`: puts class keys A, B, C into the kernel keyring.
struct Unlock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Unlock the domain: the passphrase's class keys go into the kernel keyring.",
        discussion: "With --timeout, classes complete and completeUnlessOpen lock by themselves when the kernel expires their keys; running apps get `willLock` --grace before (default 500ms). completeUntilFirstUserAuthentication stays until `lock --evict-all`.")
    @OptionGroup var domain: DomainOptions
    @OptionGroup var passphrase: PassphraseOptions
    @Option(help: ArgumentHelp("Lock again automatically after this long: 90, 90s, 15m, 2h.", valueName: "duration"))
    var timeout: String?
    @Option(help: ArgumentHelp("With --timeout: tell running apps `willLock` this long before the auto-lock: 500ms (default), 2s, 0.", valueName: "duration"))
    var grace: String?

    func run() throws {
        let seconds = try timeout.map(parseDuration)
        if grace != nil && seconds == nil { throw CLIError(exit: .usage, message: "--grace needs --timeout", hint: "`dpctl unlock --timeout 15m --grace 2s`; a plain `dpctl lock` takes its own --grace") }
        let warning = try grace.map(parseGrace) ?? LiveLock.defaultGrace
        let d = try domain.open()
        let secret = try passphrase.source.read()
        try d.unlock(passphrase: secret, timeout: seconds, grace: warning)
        note("unlocked\(seconds.map { "; classes complete and completeUnlessOpen lock again in \($0) s (running apps are told \(milliseconds(warning)) ms before)" } ?? "")")
    }
}

/// `d` in whole milliseconds, for messages.
func milliseconds(_ d: Duration) -> Int64 { d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000 }

/// Parses a grace period: `500ms`, `2s`, `1.5s`, `2` (seconds), `0`; at most one hour.
func parseGrace(_ s: String) throws -> Duration {
    let ms: Double?
    if s.hasSuffix("ms") { ms = Double(s.dropLast(2)) } else { ms = Double(s.hasSuffix("s") ? String(s.dropLast()) : s).map { $0 * 1000 } }
    guard let ms, ms.isFinite, ms >= 0, ms <= 3_600_000, s.first?.isNumber == true else {
        throw CLIError(exit: .usage, message: "invalid --grace '\(s)'", hint: "use milliseconds or seconds: 500ms, 2s, 1.5s, 0 (or `dpctl lock --now`)")
    }
    return .milliseconds(Int64(ms.rounded()))
}

/// Parses `90`, `90s`, `15m`, `2h` into seconds.
func parseDuration(_ s: String) throws -> UInt32 {
    let units: [Character: UInt32] = ["s": 1, "m": 60, "h": 3600]
    var digits = Substring(s)
    var unit: UInt32 = 1
    if let last = s.last, let u = units[last] { unit = u; digits = digits.dropLast() }
    guard let n = UInt32(digits), n > 0, n <= UInt32.max / unit else {
        throw CLIError(exit: .usage, message: "invalid --timeout '\(s)'", hint: "use seconds, or a number with s, m or h: 90, 15m, 2h")
    }
    return n * unit
}

/// `dpctl lock`.
struct Lock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Lock the domain: remove classes complete and completeUnlessOpen from the keyring.",
        discussion: "Running apps get `willLock` with the deadline first, and the lock happens at that deadline: 500ms after the command starts unless --grace says otherwise. --now locks at once and sends no `willLock`.")
    @OptionGroup var domain: DomainOptions
    @Flag(name: .customLong("evict-all"), help: "Also remove completeUntilFirstUserAuthentication (the analogue of a reboot).")
    var evictAll = false
    @Option(help: ArgumentHelp("Tell running apps `willLock` this long before locking: 500ms (default), 2s, 10 (seconds; Apple gives about 10 s).", valueName: "duration"))
    var grace: String?
    @Flag(help: "Lock at once, without telling running apps `willLock` first.")
    var now = false

    func run() throws {
        if now && grace != nil { throw CLIError(exit: .usage, message: "--now and --grace contradict each other", hint: "use one: `dpctl lock --now`, or `dpctl lock --grace 2s`") }
        let wait = now ? .zero : try grace.map(parseGrace) ?? LiveLock.defaultGrace
        let d = try domain.open()
        let report = try d.lock(evictAll: evictAll, grace: wait)
        var what = evictAll ? "locked (all classes evicted)" : "locked (complete, completeUnlessOpen)"
        if report.warnedDeadlineUnixMillis != nil { what += " after telling running apps `willLock` \(milliseconds(wait)) ms ahead" }
        what += "; \(report.processesAcknowledged) process(es) wiped their keys in \(String(format: "%.1f", report.elapsedMillis)) ms"
        if report.processesTimedOut > 0 { what += "; \(report.processesTimedOut) did not answer (their handles still fail)" }
        note(what)
    }
}

/// `dpctl status`.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the lock state of each class, the auto-lock deadline and the keyring key ids.")
    @OptionGroup var domain: DomainOptions
    @Flag(help: "Print JSON for scripts.") var json = false

    func run() throws {
        let s = try domain.open().status()
        if json {
            var classes: [[String: Any]] = []
            for c in s.classes {
                classes.append([
                    "class": c.protectionClass.name, "letter": String(c.protectionClass.letter), "unlocked": c.unlocked,
                    "canCreate": c.canCreate, "generation": c.currentGeneration, "generations": c.generations,
                    "keyIDs": Dictionary(uniqueKeysWithValues: c.keySerials.map { (String($0.key), $0.value) }),
                ])
            }
            var out: [String: Any] = [
                "domain": s.id.description, "home": s.home, "classes": classes,
                "kdf": ["opsLimit": s.kdf.opsLimit, "memLimitBytes": s.kdf.memLimit],
                "keyring": keyringName(s.keyStore), "binding": s.binding == .file ? "file" : "tpm2",
            ]
            out["autoLockDeadline"] = s.autoLockDeadline ?? NSNull()
            out["pendingRotation"] = s.pendingRotation ?? NSNull()
            printJSON(out)
            return
        }
        print("domain   \(s.id)")
        print("home     \(s.home)")
        print("keyring  \(keyringName(s.keyStore))")
        print("binding  \(s.binding)")
        for c in s.classes {
            let state = c.unlocked ? "unlocked" : (c.canCreate ? "locked (create allowed)" : "locked")
            let ids = c.keySerials.sorted { $0.key < $1.key }.map { "gen \($0.key): key \($0.value)" }.joined(separator: ", ")
            print("\(c.protectionClass.letter) \(c.protectionClass.name.padding(toLength: 38, withPad: " ", startingAt: 0)) \(state.padding(toLength: 24, withPad: " ", startingAt: 0)) generation \(c.currentGeneration)\(ids.isEmpty ? "" : "  [\(ids)]")")
        }
        if let d = s.autoLockDeadline {
            let left = max(0, d - Int64(Date().timeIntervalSince1970))
            print("auto-lock at \(ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(d)))) (in \(left) s)")
        }
        if let p = s.pendingRotation { print("unfinished rotation: \(p); finish it with `dpctl rotate`") }
    }

    private func keyringName(_ k: KeyStore) -> String {
        switch k {
        case .kernel(let p): p == .user ? "@u" : "@s"
        case .inProcess: "in-process"
        }
    }
}

/// Prints a JSON object with sorted keys on standard output.
func printJSON(_ object: Any) {
    let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])) ?? Data("{}".utf8)
    FileHandle.standardOutput.write(data)
    FileHandle.standardOutput.write(Data("\n".utf8))
}

/// Writes all of `bytes` to `fd` (no copy), retrying on EINTR; false on failure.
func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
    var done = 0
    while done < bytes.count {
        let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return false }
        done += n
    }
    return true
}
