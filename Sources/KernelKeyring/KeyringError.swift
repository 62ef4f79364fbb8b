/// The one error KernelKeyring throws: a code to switch on, a message to act on, and the errno behind it.
public struct KeyringError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, for a program to switch on.
    public enum Code: Hashable, Sendable {
        /// No such key, or not reachable from that keyring (ENOKEY, ENOENT).
        case notFound
        /// The key's permissions refuse this to the caller (EACCES, EPERM).
        case permissionDenied
        /// The key's timeout elapsed (EKEYEXPIRED).
        case expired
        /// The key was revoked (EKEYREVOKED).
        case revoked
        /// The uid's key count or byte quota is used up (EDQUOT).
        case quotaExceeded
        /// The kernel keyring is refused to this process: ENOSYS, or EPERM/EACCES
        /// from a seccomp filter on `add_key`/`keyctl` (checked with a harmless probe).
        case unavailable
        /// The kernel or this module rejected an argument (EINVAL, ENOTDIR for a non-keyring, ENODEV for an unknown type, a NUL in a name).
        case invalidArgument
        /// The caller's buffer is smaller than the payload; `required` is the payload's length.
        case bufferTooSmall(required: Int)
        /// Any other errno, passed through.
        case io(Int32)
    }

    /// What went wrong, for a program to switch on.
    public let code: Code
    /// The errno the kernel returned, or 0 when this module detected the problem itself.
    public let errno: Int32
    /// The C function that failed, e.g. `keyctl_read`.
    public let operation: String
    /// The key or keyring the call was about, when there was one.
    public let key: KeySerial?
    /// The description (name) of that key, when known.
    public let keyDescription: String?
    /// A sentence a person can act on: what failed, on which key, and the fix.
    public let message: String

    public var description: String { message }

    init(
        code: Code, errno: Int32, operation: String, key: KeySerial?, keyDescription: String?,
        message: String
    ) {
        self.code = code
        self.errno = errno
        self.operation = operation
        self.key = key
        self.keyDescription = keyDescription
        self.message = message
    }
}

extension KeyringError.Code: CustomStringConvertible {
    /// The code as a program or script would name it: `notFound`, `bufferTooSmall(32)`, `io(95)`.
    public var description: String {
        switch self {
        case .notFound: "notFound"
        case .permissionDenied: "permissionDenied"
        case .expired: "expired"
        case .revoked: "revoked"
        case .quotaExceeded: "quotaExceeded"
        case .unavailable: "unavailable"
        case .invalidArgument: "invalidArgument"
        case .bufferTooSmall(let required): "bufferTooSmall(\(required))"
        case .io(let code): "io(\(code))"
        }
    }
}
