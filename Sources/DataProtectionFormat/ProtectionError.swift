#if canImport(Glibc)
import Glibc
#endif
import ProtectionCrypto

/// The one error type of the library: DataProtection throws it, and re-exports it from here.
///
/// It is defined in the format module, the lowest module that throws it (a
/// header, keybag or domain identifier that does not parse), so a parse error
/// reaches the caller with the same code and message it has always had.
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
        /// The domain is bound to a TPM 2.0, and no TPM answers through the TCTI, or it refused the operation.
        case tpmUnavailable
        /// The domain is bound to another TPM: its TPM key does not load in this one (a copy from another
        /// machine, or this TPM was cleared). The message names the fix: `dpctl recover` with the recovery key.
        case wrongTPM
        /// The TPM is in dictionary-attack lockout after too many wrong passphrases; the message says when to retry.
        case tpmLockout
        /// File coordination did not grant access (timed out, would deadlock, cancelled).
        case coordinationFailed
        /// The domain's keys were retired in this process: its service is shutting down (`DataProtectionService`), so
        /// no new open, create or key fetch is admitted, and handles it closed refuse further calls.
        case shuttingDown
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

    /// The message, as `message`.
    public var description: String { message }
}

/// Runs a crypto step, turning its failure into a `ProtectionError`.
@inline(__always)
package func crypto<R: ~Copyable>(_ body: () throws(CryptoError) -> R) throws(ProtectionError) -> R {
    do { return try body() } catch {
        throw ProtectionError(error.code == .outOfMemory ? .io(ENOMEM) : .io(EIO), error.message, underlying: error)
    }
}
