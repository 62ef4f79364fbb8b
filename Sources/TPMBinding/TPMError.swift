/// The error every TPMBinding operation throws: what the TPM (or the way to it) did, without any tss2 type.
///
/// `code` is what a caller switches on; `message` says what happened in words, with the TPM's response code
/// decoded (never an auth value or an HMAC output).
public struct TPMError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: Sendable, Equatable {
        /// No TPM answers through the TCTI (no device, no simulator, no TCTI library of that name).
        case unavailable
        /// The TPM answered but refused the operation (an owner password is set, it is out of memory, disabled…).
        case refused
        /// The key's blobs do not load under this TPM's storage primary: they were made by another TPM (or
        /// this one's owner hierarchy was cleared since).
        case wrongTPM
        /// The auth value is wrong; the TPM counted one more failure towards its dictionary-attack lockout.
        case authorizationFailed
        /// The TPM is in dictionary-attack lockout and refuses every DA-protected authorisation for now.
        case lockout
        /// The stored blobs are not a TPM2B_PUBLIC / TPM2B_PRIVATE pair.
        case malformedBlob
    }

    /// What went wrong, for a caller to switch on.
    public let code: Code
    /// What went wrong, for a person.
    public let message: String
    /// For `.lockout` and `.authorizationFailed`: the TPM's dictionary-attack state when the error was seen.
    public let lockout: LockoutState?

    /// An error with its code, message and the lockout state when known.
    public init(_ code: Code, _ message: String, lockout: LockoutState? = nil) {
        self.code = code
        self.message = message
        self.lockout = lockout
    }

    /// The message, as `message`.
    public var description: String { message }
}

/// The TPM's dictionary-attack state (TPM2_PT_LOCKOUT_COUNTER, _MAX_AUTH_FAIL, _LOCKOUT_INTERVAL, _LOCKOUT_RECOVERY).
public struct LockoutState: Sendable, Equatable {
    /// Authorisation failures the TPM holds against DA-protected objects now.
    public let failures: UInt32
    /// Failures after which it locks out (maxTries).
    public let maxFailures: UInt32
    /// Seconds after which one failure is forgotten (recoveryTime); a locked-out TPM allows one more try after at most this long.
    public let interval: UInt32
    /// Seconds after a failed lockout-hierarchy authorisation before the lockout hierarchy can be tried again.
    public let lockoutRecovery: UInt32

    /// A state from its four properties.
    public init(failures: UInt32, maxFailures: UInt32, interval: UInt32, lockoutRecovery: UInt32) {
        self.failures = failures
        self.maxFailures = maxFailures
        self.interval = interval
        self.lockoutRecovery = lockoutRecovery
    }

    /// Whether the TPM refuses DA-protected authorisations now.
    public var isLockedOut: Bool { maxFailures == 0 || failures >= maxFailures }
}
