import ArgumentParser
import DataProtection
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif

/// Where one secret (a passphrase, a recovery key) comes from: the terminal, a file descriptor or a file — never argv.
///
/// Every path reads straight into locked memory (`SecretBytes`), one byte at
/// a time up to the first newline, so no copy lands in a Swift `String` and
/// two secrets can follow each other on one descriptor.
struct SecretSource {
    var fd: Int32?
    var file: String?
    /// What to call the secret in prompts and errors ("passphrase", "new passphrase").
    var name: String
    /// The option names, for error messages.
    var fdOption: String
    var fileOption: String

    static let capacity = 4096

    /// Reads the secret; on a terminal, asks twice when `confirm`.
    /// - Throws: `CLIError(.usage)` when there is no terminal and no fd or file was given, or the secret is empty.
    func read(confirm: Bool = false) throws -> SecretBytes {
        if let fd { return try Self.readLine(fd: fd, what: "--\(fdOption) \(fd)", name: name) }
        if let file {
            let fd = open(file, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                throw CLIError(exit: errno == ENOENT ? .notFound : .io, message: "unable to read the \(name) from '\(file)': \(String(cString: strerror(errno)))", hint: nil)
            }
            defer { close(fd) }
            return try Self.readLine(fd: fd, what: "'\(file)'", name: name)
        }
        let first = try Self.ask("Enter \(name): ", name: name, fdOption: fdOption, fileOption: fileOption)
        guard confirm else { return first }
        let again = try Self.ask("Repeat \(name): ", name: name, fdOption: fdOption, fileOption: fileOption)
        guard first.constantTimeEquals(again) else {
            throw CLIError(exit: .usage, message: "the two \(name)s differ; nothing was changed", hint: "run the command again and type the same \(name) twice")
        }
        return first
    }

    /// Reads up to the first newline (or end of input) from `fd` into locked memory.
    static func readLine(fd: Int32, what: String, name: String) throws -> SecretBytes {
        var buf = try SecretBytes(zeroedCount: capacity)
        var n = 0
        let failure: Int32? = buf.withUnsafeMutableBytes { b in
            while n < capacity {
                let r = Glibc.read(fd, b.baseAddress! + n, 1)
                if r < 0 { if errno == EINTR { continue }; return errno }
                if r == 0 || b[n] == 10 { if r > 0 { b[n] = 0 }; return nil }
                n += 1
            }
            return nil
        }
        if let failure { throw CLIError(exit: .io, message: "unable to read the \(name) from \(what): \(String(cString: strerror(failure)))", hint: nil) }
        if n > 0 && buf.withUnsafeBytes({ $0[n - 1] }) == 13 { n -= 1 }  // CRLF
        guard n > 0 else { throw CLIError(exit: .usage, message: "the \(name) from \(what) is empty", hint: "write the \(name) followed by a newline") }
        return try buf.withUnsafeBytes { try SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
    }

    /// Prompts on the controlling terminal with echo off (termios) and reads one line into locked memory.
    static func ask(_ prompt: String, name: String, fdOption: String, fileOption: String) throws -> SecretBytes {
        let tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        guard tty >= 0 else {
            throw CLIError(exit: .usage, message: "there is no terminal to ask for the \(name)", hint: "pass it with --\(fdOption) N or --\(fileOption) PATH (never as an argument)")
        }
        defer { close(tty) }
        var saved = termios()
        let isTerminal = tcgetattr(tty, &saved) == 0
        if isTerminal {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            quiet.c_lflag |= tcflag_t(ECHONL)
            tcsetattr(tty, TCSAFLUSH, &quiet)
        }
        defer { if isTerminal { tcsetattr(tty, TCSAFLUSH, &saved) } }
        _ = prompt.withCString { write(tty, $0, strlen($0)) }
        return try readLine(fd: tty, what: "the terminal", name: name)
    }
}

/// `--passphrase-fd` / `--passphrase-file`.
struct PassphraseOptions: ParsableArguments {
    @Option(name: .customLong("passphrase-fd"), help: ArgumentHelp("Read the passphrase from this file descriptor (up to the first newline).", valueName: "n"))
    var fd: Int32?
    @Option(name: .customLong("passphrase-file"), help: ArgumentHelp("Read the passphrase from this file (first line).", valueName: "path"))
    var file: String?

    var source: SecretSource { SecretSource(fd: fd, file: file, name: "passphrase", fdOption: "passphrase-fd", fileOption: "passphrase-file") }
}

/// `--new-passphrase-fd` / `--new-passphrase-file`.
struct NewPassphraseOptions: ParsableArguments {
    @Option(name: .customLong("new-passphrase-fd"), help: ArgumentHelp("Read the new passphrase from this file descriptor (may equal --passphrase-fd: one line each).", valueName: "n"))
    var fd: Int32?
    @Option(name: .customLong("new-passphrase-file"), help: ArgumentHelp("Read the new passphrase from this file (first line).", valueName: "path"))
    var file: String?

    var source: SecretSource { SecretSource(fd: fd, file: file, name: "new passphrase", fdOption: "new-passphrase-fd", fileOption: "new-passphrase-file") }
}
