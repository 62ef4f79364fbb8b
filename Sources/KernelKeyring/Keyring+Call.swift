// The one path every operation takes from a libkeyutils result to a value or a KeyringError.
import Logging

extension Keyring {
    /// Logs a finished call and turns a negative result into a `KeyringError`.
    ///
    /// `call` renders the C call for the log (payloads as `<data>`); it and
    /// `subject` are only evaluated when logging or failing.
    @inline(__always)
    func check(
        _ result: Int, _ level: Logger.Level, _ operation: String,
        syscall: KeyringSyscall = .keyctl,
        subject: @autoclosure () -> KeyringSubject,
        call: @autoclosure () -> String
    ) throws(KeyringError) -> Int {
        if result >= 0 {
            logger?.log(level: level, "\(call()) = \(result)")
            return result
        }
        let code = system_errno
        logger?.log(level: level, "\(call()) = -1 \(KeyringError.errnoName(code))")
        throw KeyringError.translating(
            errno: code, operation: operation, syscall: syscall, subject: subject())
    }

    /// Calls `body` with `name` as a C string, refusing names the kernel would silently truncate.
    @inline(__always)
    func withCName<R>(
        _ name: String, _ operation: String, subject: @autoclosure () -> KeyringSubject,
        _ body: (UnsafePointer<CChar>) throws(KeyringError) -> R
    ) throws(KeyringError) -> R {
        if name.utf8.contains(0) {
            throw .invalid(
                "the name contains a NUL byte, which C would cut it at; remove it",
                operation: operation, subject: subject())
        }
        // withCString only rethrows untyped errors; carry the typed one out by hand.
        var failure: KeyringError?
        let value: R? = name.withCString { pointer in
            do throws(KeyringError) { return try body(pointer) } catch {
                failure = error
                return nil
            }
        }
        if let failure { throw failure }
        return value!
    }
}

/// A name quoted as C source would show it, for logs.
@inline(__always)
func quoted(_ name: String) -> String { "\"\(name)\"" }
