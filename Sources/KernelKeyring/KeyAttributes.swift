/// What the kernel reports about a key without revealing its payload (C: `keyctl_describe`).
public struct KeyAttributes: Hashable, Sendable {
    /// The key's type.
    public var type: KeyType
    /// The uid that owns the key (its quota is charged to this uid).
    public var uid: UInt32
    /// The gid the group permissions apply to.
    public var gid: UInt32
    /// The key's permission mask.
    public var permissions: KeyPermissions
    /// The key's description (its name).
    public var description: String

    /// Parses the kernel's `type;uid;gid;perm;description` form; `nil` if it is malformed.
    init?(parsing text: Substring) {
        let fields = text.split(separator: ";", maxSplits: 4, omittingEmptySubsequences: false)
        guard fields.count == 5,
            let uid = UInt32(fields[1]), let gid = UInt32(fields[2]),
            let perm = UInt32(fields[3], radix: 16)
        else { return nil }
        self.type = KeyType(rawValue: String(fields[0]))
        self.uid = uid
        self.gid = gid
        self.permissions = KeyPermissions(rawValue: perm)
        self.description = String(fields[4])
    }
}
