import ProtectionCrypto

/// The one error type of the DataProtection module.
///
/// `code` is what a program switches on; `message` is what a person reads: it
/// names the file and the fix. `underlying` keeps the cause (an errno, a
/// crypto failure). Descriptions never include key bytes or plaintext.
public struct ProtectionError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, for a program to switch on.
    public enum Code: Sendable, Hashable {
        /// A tag did not verify: the file was changed, truncated, extended or spliced.
        case authenticationFailed
        /// The header is malformed (bad magic, lengths, or fields).
        case corruptHeader
        /// The file was written by a newer format version.
        case unsupportedVersion
        /// The header uses a feature flag this version does not know.
        case unsupportedFeature
        /// The class key this file needs is not available: the domain is locked.
        case locked
        /// The cipher is not supported on this CPU.
        case unsupportedCipher
        /// A path, offset, size or option is out of range.
        case invalidArgument
        /// The file is not a protected file.
        case notProtected
        /// The file or directory does not exist.
        case notFound
        /// The file exists where a new one was to be created.
        case alreadyExists
        /// The handle was closed, or opened read-only for a write.
        case badHandle
        /// The file would exceed the format's maximum size.
        case fileTooLarge
        /// A container path resolves outside the container (`..`, an absolute path, a symbolic
        /// or magic link leaving it) or reaches a file with extra hard links.
        case escapesContainer
        /// The item is read-only through this API (the bundle, the Inbox, Preferences).
        case readOnly
        /// The container's sealed bundle does not match its signed manifest.
        case bundleTampered
        /// The keybag is malformed or fails authentication.
        case corruptKeybag
        /// The passphrase or recovery key is wrong.
        case wrongPassphrase
        /// The kernel keyring refused the operation (e.g. a seccomp profile).
        case keyringUnavailable
        /// A file or directory holding secrets is readable or writable by others; the message names the `chmod` fix.
        case insecurePermissions
        /// Something other than a regular file of ours (a symbolic link, a hard link, a FIFO, a directory, another
        /// user's file) is at a name the library owns (a journal, a temporary file), or is the file a journal
        /// names; nothing was written through it. The message names it and the fix.
        case untrustedFile
        /// File coordination did not grant access (timed out, would deadlock, cancelled).
        case coordinationFailed
        /// A system call failed with this errno.
        case io(Int32)
    }

    /// What went wrong, for a program to switch on.
    public let code: Code
    /// What went wrong and the fix, for a person: "unable to open '<path>': …; run `dpctl unlock`".
    public let message: String
    /// The file the error is about, when there is one.
    public let path: String?
    /// The cause, when another layer reported it.
    public let underlying: (any Error & Sendable)?

    /// An error with its code and message.
    /// - Parameters:
    ///   - code: what a program switches on.
    ///   - message: what a person reads: the file and the fix; never key bytes or plaintext.
    ///   - path: the file the error is about.
    ///   - underlying: the cause another layer reported.
    public init(_ code: Code, _ message: String, path: String? = nil, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.underlying = underlying
    }

    public var description: String { message }

    /// The same error, re-attributed to `path` with the message prefixed as
    /// "unable to <action> '<path>': …" unless it already names a file.
    func about(_ path: String, _ action: String) -> ProtectionError {
        guard self.path == nil else { return self }
        return ProtectionError(code, "unable to \(action) '\(path)': \(message)", path: path, underlying: underlying)
    }

    /// The same error told about `path` instead of a temporary file standing in for it:
    /// "unable to <action> '<path>': <reason>" (the cause stays in `underlying`).
    func retargeted(_ path: String, _ action: String) -> ProtectionError {
        guard let p = self.path, p != path else { return self }
        var reason = message
        if let r = message.firstRange(of: "'\(p)': ") { reason = String(message[r.upperBound...]) }
        return ProtectionError(code, "unable to \(action) '\(path)': \(reason)", path: path, underlying: underlying ?? self)
    }

    /// Wraps an errno from a system call on `path`.
    static func errno(_ err: Int32, _ action: String, _ path: String) -> ProtectionError {
        let fix: String
        switch err {
        case ENOENT: return ProtectionError(.notFound, "unable to \(action) '\(path)': no such file or directory", path: path)
        case EEXIST: return ProtectionError(.alreadyExists, "unable to \(action) '\(path)': it already exists; remove it or choose another name", path: path)
        case EACCES, EPERM: fix = "; check its owner and permissions"
        case ENOSPC: fix = "; free some space on its filesystem"
        case EROFS: fix = "; its filesystem is mounted read-only; remount it read-write (`mount -o remount,rw`) or use a writable location"
        case EDQUOT: fix = "; the disk quota is exhausted"
        default: fix = ""
        }
        return ProtectionError(.io(err), "unable to \(action) '\(path)': \(String(cString: strerror(err)))\(fix)", path: path)
    }

    /// Translates a crypto failure met while working on `path`.
    static func crypto(_ e: CryptoError, _ action: String, _ path: String) -> ProtectionError {
        switch e.code {
        case .authenticationFailed:
            return ProtectionError(.authenticationFailed, "unable to \(action) '\(path)': authentication failed; the file was modified, truncated or damaged; restore it from a backup", path: path, underlying: e)
        case .unsupportedCipher:
            return ProtectionError(.unsupportedCipher, "unable to \(action) '\(path)': \(e.message)", path: path, underlying: e)
        default:
            return ProtectionError(.io(EIO), "unable to \(action) '\(path)': \(e.message)", path: path, underlying: e)
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
