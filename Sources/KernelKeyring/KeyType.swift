/// The type of a kernel key, which decides what its payload is and who may read it back.
///
/// Only the types the project uses have constants; any other type the kernel
/// knows can be named with `init(rawValue:)`.
public struct KeyType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The kernel's name for the type, e.g. `"user"`.
    public let rawValue: String

    /// Names a key type; the kernel rejects unknown names with `invalidArgument`.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// A key whose payload userspace can read back (up to 32767 bytes).
    public static let user = KeyType(rawValue: "user")
    /// A keyring: a key whose payload is a list of links to other keys.
    public static let keyring = KeyType(rawValue: "keyring")
    /// A key userspace can add but never read back (`keyctl_read` fails with
    /// EOPNOTSUPP); its description must have a `prefix:` form.
    public static let logon = KeyType(rawValue: "logon")

    public var description: String { rawValue }
}
