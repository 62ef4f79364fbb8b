import Logging

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

/// Typed access to the Linux kernel keyring (C: libkeyutils), logging each call to the caller's logger.
///
/// A `Keyring` holds no state but the optional logger: every operation is one
/// or two libkeyutils calls, and every failure is a `KeyringError`. The module
/// never owns secret bytes: payloads go in from, and come back into, buffers
/// the caller provides (so they can be locked `sodium_malloc` memory).
///
/// Calls are logged at `trace` (reads, searches, lookups) or `debug` (calls
/// that change keys), in C form with payloads shown only as `<data>`:
/// `add_key("user", "dp:a", <data>, 32, @s) = 123`.
public struct Keyring: Sendable {
    /// Where calls are logged; `nil` logs nothing and costs nothing.
    public var logger: Logger?

    /// Creates a handle that logs to `logger`, if one is given.
    ///
    /// - Parameter logger: the caller's logger; the module never makes its own.
    public init(logger: Logger? = nil) {
        self.logger = logger
    }

    /// Checks cheaply whether this process may use the kernel keyring at all, touching no key.
    ///
    /// Issues one harmless `keyctl` call (`KEYCTL_CAPABILITIES` with no buffer)
    /// and one `add_key` call with an empty type, which the kernel must reject
    /// with EINVAL. A seccomp filter (or a kernel without keys) answers EPERM,
    /// EACCES or ENOSYS instead.
    ///
    /// - Parameter logger: where to log the probe calls.
    /// - Throws: `KeyringError` with code `unavailable` when the keyring is
    ///   refused; another code (usually `io`) if a probe fails unexpectedly.
    public static func checkAvailable(logger: Logger? = nil) throws(KeyringError) {
        for syscall in [KeyringSyscall.keyctl, .addKey] {
            let (operation, result) = probe(syscall)
            logger?.trace("\(operation) = \(result == 0 ? "ok" : KeyringError.errnoName(result))")
            guard result != 0 else { continue }
            let code: KeyringError.Code =
                refused(result) ? .unavailable : KeyringError.Code(errno: result)
            throw KeyringError(
                code: code, errno: result, operation: operation, key: nil,
                keyDescription: nil,
                message: KeyringError.message(
                    code: code, errno: result, operation: operation, subject: .none))
        }
    }

    /// The errno that shows `syscall` itself is refused, or `nil` if it is allowed.
    static func refusal(of syscall: KeyringSyscall) -> Int32? {
        let result = probe(syscall).errno
        return refused(result) ? result : nil
    }

    private static func refused(_ code: Int32) -> Bool {
        code == EPERM || code == EACCES || code == ENOSYS
    }

    /// Runs the harmless call for `syscall`; errno 0 means it behaved as an allowed call must.
    private static func probe(_ syscall: KeyringSyscall) -> (operation: String, errno: Int32) {
        switch syscall {
        case .keyctl:
            // Returns the capabilities' size, or EOPNOTSUPP before Linux 5.3.
            let result = system_keyctl_capabilities_probe()
            let code = result >= 0 ? 0 : system_errno
            return ("keyctl(KEYCTL_CAPABILITIES, NULL, 0)", code == EOPNOTSUPP ? 0 : code)
        case .addKey:
            // An empty type is rejected with EINVAL before any other check.
            let result = system_add_key("", "", nil, 0, 0)
            let code = result >= 0 ? 0 : system_errno
            return ("add_key(\"\", \"\", NULL, 0, 0)", code == EINVAL ? 0 : code)
        }
    }
}
