/// The serial number of a key or keyring in the Linux kernel keyring (C: `key_serial_t`).
///
/// Positive values name real keys; the negative special values
/// (`thread`, `process`, `session`, `user`, `userSession`) name the calling
/// thread's keyrings and are resolved by the kernel at each call.
/// Use `Keyring.id(of:create:)` to turn a special value into a real serial.
public struct KeySerial: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The kernel's serial number (C: `key_serial_t`, an `int32_t`).
    public let rawValue: Int32

    /// Wraps a serial number as returned by the kernel or by `keyctl show`.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's thread keyring (C: `KEY_SPEC_THREAD_KEYRING`, `@t`).
    public static let thread = KeySerial(rawValue: -1)
    /// The calling thread's process keyring (C: `KEY_SPEC_PROCESS_KEYRING`, `@p`).
    public static let process = KeySerial(rawValue: -2)
    /// The calling thread's session keyring (C: `KEY_SPEC_SESSION_KEYRING`, `@s`).
    ///
    /// Trap: a process without a session keyring of its own gets a throw-away
    /// one created on first use, which dies with the process.
    public static let session = KeySerial(rawValue: -3)
    /// The keyring shared by every process of the caller's uid (C: `KEY_SPEC_USER_KEYRING`, `@u`).
    public static let user = KeySerial(rawValue: -4)
    /// The caller's default session keyring (C: `KEY_SPEC_USER_SESSION_KEYRING`, `@us`).
    public static let userSession = KeySerial(rawValue: -5)

    /// Whether this is one of the special, per-caller keyring values.
    public var isSpecial: Bool { rawValue < 0 }

    /// `@s`, `@u`… for the special values, the decimal serial otherwise (as `keyctl` prints them).
    public var description: String {
        switch rawValue {
        case -1: "@t"
        case -2: "@p"
        case -3: "@s"
        case -4: "@u"
        case -5: "@us"
        default: String(rawValue)
        }
    }
}
