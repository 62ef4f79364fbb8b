import ArgumentParser
import DataProtection
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// dpctl's stable exit codes (sysexits.h numbers where one fits). Documented in README.md and `dpctl --help`.
enum Exit: Int32, CaseIterable {
    case ok = 0
    /// The user declined a confirmation (`wipe` without `--yes`).
    case declined = 1
    /// `audit` found items that are not protected where the container's policy expects protection.
    case auditFindings = 3
    case usage = 64
    case tampered = 65
    case notFound = 66
    case keyringUnavailable = 69
    case alreadyExists = 73
    case io = 74
    case locked = 75
    case unsupported = 76
    case wrongPassphrase = 77
    case insecurePermissions = 78
    case busy = 79
    case tpm = 80

    var meaning: String {
        switch self {
        case .ok: "success"
        case .declined: "the confirmation was declined; nothing was changed"
        case .auditFindings: "`audit` found plaintext (or a link or special file) where the container's policy expects protection"
        case .usage: "usage error: bad option, argument or input (see --help)"
        case .tampered: "tampered or corrupt data: a file, header or keybag failed authentication or is malformed, or something not ours is at a name the library owns"
        case .notFound: "not found: no such file, no domain at the home, or its device secret is missing"
        case .keyringUnavailable: "the kernel keyring is refused to this process (e.g. a seccomp profile)"
        case .alreadyExists: "the file or domain to create already exists"
        case .io: "I/O error (the message names the file and the system error)"
        case .locked: "the class key needed is locked; run `dpctl unlock`"
        case .unsupported: "written by a newer version, or a cipher this CPU lacks"
        case .wrongPassphrase: "wrong passphrase or recovery key"
        case .insecurePermissions: "a secret's file or directory is accessible to others; the message gives the chmod"
        case .busy: "another process held the file (file coordination) past the timeout, or (`repair`) a live writer holds a journal or temporary file; try again"
        case .tpm: "the domain's TPM is unreachable or refused, is in dictionary-attack lockout (the message says when to retry), or is not the TPM the domain is bound to"
        }
    }

    /// The code for a library error.
    init(_ code: ProtectionError.Code) {
        switch code {
        case .authenticationFailed, .corruptHeader, .corruptKeybag, .notProtected, .bundleTampered, .untrustedFile: self = .tampered
        case .unsupportedVersion, .unsupportedFeature, .unsupportedCipher: self = .unsupported
        case .locked: self = .locked
        case .invalidArgument, .escapesContainer, .readOnly: self = .usage
        case .notFound: self = .notFound
        case .alreadyExists: self = .alreadyExists
        case .badHandle, .fileTooLarge, .io, .shuttingDown: self = .io
        case .wrongPassphrase: self = .wrongPassphrase
        case .keyringUnavailable: self = .keyringUnavailable
        case .insecurePermissions: self = .insecurePermissions
        case .coordinationFailed: self = .busy
        case .tpmUnavailable, .wrongTPM, .tpmLockout: self = .tpm
        @unknown default: self = .io
        }
    }

    /// The table for `--help` and the README.
    static var table: String {
        allCases.map { "  \(String($0.rawValue).padding(toLength: 4, withPad: " ", startingAt: 0)) \($0.meaning)" }.joined(separator: "\n")
    }
}

/// A failure found by dpctl itself (not the library): a message, a hint and an exit code.
struct CLIError: Error {
    var exit: Exit
    var message: String
    var hint: String?
}

/// Prints `dpctl: error: …` and `dpctl: hint: …` to standard error and exits with the stable code.
enum Failure {
    /// The `--home` the user gave, repeated in hints so they can be pasted.
    nonisolated(unsafe) static var homeArgument = ""

    static func report(_ e: ProtectionError) -> Never {
        let exit = Exit(e.code)
        emit(e.message, hint: hint(for: e.code, exit), exit)
    }

    static func report(_ e: CLIError) -> Never { emit(e.message, hint: e.hint, e.exit) }

    static func reportParserError(_ error: Error) -> Never {
        let code = Dpctl.exitCode(for: error)
        let text = Dpctl.fullMessage(for: error)
        if code == .success {
            print(text)
            Glibc.exit(0)
        }
        if code.rawValue != 64 { Glibc.exit(code.rawValue) }  // ExitCode thrown on purpose
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let first = lines.first.map { $0.hasPrefix("Error: ") ? String($0.dropFirst(7)) : String($0) } ?? "invalid usage"
        emit(first, hint: lines.dropFirst().joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "\n", with: "\ndpctl: hint: "), .usage)
    }

    private static func hint(for code: ProtectionError.Code, _ exit: Exit) -> String? {
        let h = homeArgument
        switch code {
        case .locked: return "unlock the domain: `dpctl\(h) unlock`"
        case .wrongPassphrase: return "try again; if the passphrase is forgotten: `dpctl\(h) recover` with the recovery key shown at init"
        case .wrongTPM, .tpmLockout, .tpmUnavailable: return nil  // the library's message names the fix
        case .keyringUnavailable: return "allow the add_key, keyctl and request_key system calls in this container's seccomp profile, or run dpctl outside it"
        case .notFound: return nil
        case .corruptKeybag: return "restore the keybag from a backup, or rebuild it: `dpctl\(h) recover`"
        case .authenticationFailed, .corruptHeader: return "restore the file from a backup"
        case .coordinationFailed: return "another program is reading or writing the file through file coordination; try again when it is done"
        default: return nil
        }
    }

    private static func emit(_ message: String, hint: String?, _ exit: Exit) -> Never {
        var out = "dpctl: error: \(message)\n"
        if let hint, !hint.isEmpty { out += "dpctl: hint: \(hint)\n" }
        _ = out.withCString { write(2, $0, strlen($0)) }
        Glibc.exit(exit.rawValue)
    }
}

