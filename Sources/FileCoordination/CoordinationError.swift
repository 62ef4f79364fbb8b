/// The one error type of FileCoordination: a code to switch on, a message to act on, and the OS cause.
public struct CoordinationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, for programs to switch on.
    public enum Code: String, Sendable, Equatable {
        /// A wait for another process or thread did not end before the timeout.
        case timedOut
        /// The coordination was cancelled (Task cancellation or `FileCoordinator.cancel()`).
        case cancelled
        /// A nested coordination would have had to wait while holding locks out of the global order.
        case wouldDeadlock
        /// The lock directory is on a filesystem where open-file-description locks are not reliable.
        case locksUnreliable
        /// The item is not inside the coordination domain's root.
        case outsideDomain
        /// The lock directory could not be created, opened or used.
        case lockDirectoryUnavailable
        /// The request itself is malformed (for example `item(at:didMoveTo:)` outside a write).
        case invalidRequest
        /// A file operation needed by the coordination itself failed (for example the `forUploading` copy).
        case ioFailure
    }

    /// What went wrong.
    public let code: Code
    /// The item or lock path concerned, when there is one.
    public let path: String?
    /// A sentence a person can act on.
    public let message: String
    /// The underlying `errno`, when a system call failed.
    public let errno: Int32?

    /// Creates an error.
    /// - Parameters:
    ///   - code: what went wrong.
    ///   - path: the item or lock path concerned.
    ///   - message: a sentence that names the item and the fix.
    ///   - errno: the underlying `errno`, if any.
    public init(_ code: Code, path: String?, message: String, errno: Int32? = nil) {
        self.code = code
        self.path = path
        self.message = message
        self.errno = errno
    }

    public var description: String {
        var text = "file coordination: \(code.rawValue): \(message)"
        if let errno { text += " (errno \(errno))" }
        return text
    }
}
