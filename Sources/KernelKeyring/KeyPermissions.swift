/// The permission mask of a kernel key (C: `key_perm_t`, the `KEY_POS_*`, `KEY_USR_*`, `KEY_GRP_*`, `KEY_OTH_*` bits).
///
/// The kernel checks four subjects in order: the *possessor* (a process that
/// reaches the key through its own thread, process or session keyring), then
/// the owning *user* (same fsuid), the *group* (same fsgid), and *other*.
/// A possessor gets the union of the possessor bits and whichever of the
/// other three applies. Two kernel rules matter: possession needs
/// `possessorSearch` (a key the possessor cannot search is not reachable, so
/// not possessed), and a possessor that may search a key may also read it
/// even without `possessorRead`.
public struct KeyPermissions: OptionSet, Hashable, Sendable, CustomStringConvertible {
    /// The raw mask, as `keyctl_setperm` takes it and `keyctl describe` prints it.
    public let rawValue: UInt32

    /// Wraps a raw permission mask (e.g. `0x3f0b0000`).
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Possessor may view the key's attributes (C: `KEY_POS_VIEW`).
    public static let possessorView = KeyPermissions(rawValue: 0x0100_0000)
    /// Possessor may read the payload, or list a keyring (C: `KEY_POS_READ`).
    public static let possessorRead = KeyPermissions(rawValue: 0x0200_0000)
    /// Possessor may update the payload, or add links to a keyring (C: `KEY_POS_WRITE`).
    public static let possessorWrite = KeyPermissions(rawValue: 0x0400_0000)
    /// Possessor may find the key in a search, or search a keyring (C: `KEY_POS_SEARCH`).
    public static let possessorSearch = KeyPermissions(rawValue: 0x0800_0000)
    /// Possessor may link the key into a keyring (C: `KEY_POS_LINK`).
    public static let possessorLink = KeyPermissions(rawValue: 0x1000_0000)
    /// Possessor may change permissions and the timeout (C: `KEY_POS_SETATTR`).
    public static let possessorSetAttribute = KeyPermissions(rawValue: 0x2000_0000)

    /// Owning uid may view the key's attributes (C: `KEY_USR_VIEW`).
    public static let userView = KeyPermissions(rawValue: 0x0001_0000)
    /// Owning uid may read the payload, or list a keyring (C: `KEY_USR_READ`).
    public static let userRead = KeyPermissions(rawValue: 0x0002_0000)
    /// Owning uid may update the payload, or add links to a keyring (C: `KEY_USR_WRITE`).
    public static let userWrite = KeyPermissions(rawValue: 0x0004_0000)
    /// Owning uid may find the key in a search, or search a keyring (C: `KEY_USR_SEARCH`).
    public static let userSearch = KeyPermissions(rawValue: 0x0008_0000)
    /// Owning uid may link the key into a keyring (C: `KEY_USR_LINK`).
    public static let userLink = KeyPermissions(rawValue: 0x0010_0000)
    /// Owning uid may change permissions and the timeout (C: `KEY_USR_SETATTR`).
    public static let userSetAttribute = KeyPermissions(rawValue: 0x0020_0000)

    /// Owning gid may view the key's attributes (C: `KEY_GRP_VIEW`).
    public static let groupView = KeyPermissions(rawValue: 0x0000_0100)
    /// Owning gid may read the payload (C: `KEY_GRP_READ`).
    public static let groupRead = KeyPermissions(rawValue: 0x0000_0200)
    /// Owning gid may update the payload (C: `KEY_GRP_WRITE`).
    public static let groupWrite = KeyPermissions(rawValue: 0x0000_0400)
    /// Owning gid may find the key in a search (C: `KEY_GRP_SEARCH`).
    public static let groupSearch = KeyPermissions(rawValue: 0x0000_0800)
    /// Owning gid may link the key (C: `KEY_GRP_LINK`).
    public static let groupLink = KeyPermissions(rawValue: 0x0000_1000)
    /// Owning gid may change attributes (C: `KEY_GRP_SETATTR`).
    public static let groupSetAttribute = KeyPermissions(rawValue: 0x0000_2000)

    /// Any other process may view the key's attributes (C: `KEY_OTH_VIEW`).
    public static let otherView = KeyPermissions(rawValue: 0x0000_0001)
    /// Any other process may read the payload (C: `KEY_OTH_READ`).
    public static let otherRead = KeyPermissions(rawValue: 0x0000_0002)
    /// Any other process may update the payload (C: `KEY_OTH_WRITE`).
    public static let otherWrite = KeyPermissions(rawValue: 0x0000_0004)
    /// Any other process may find the key in a search (C: `KEY_OTH_SEARCH`).
    public static let otherSearch = KeyPermissions(rawValue: 0x0000_0008)
    /// Any other process may link the key (C: `KEY_OTH_LINK`).
    public static let otherLink = KeyPermissions(rawValue: 0x0000_0010)
    /// Any other process may change attributes (C: `KEY_OTH_SETATTR`).
    public static let otherSetAttribute = KeyPermissions(rawValue: 0x0000_0020)

    /// Every possessor bit (C: `KEY_POS_ALL`).
    public static let possessorAll = KeyPermissions(rawValue: 0x3f00_0000)
    /// Every owning-uid bit (C: `KEY_USR_ALL`).
    public static let userAll = KeyPermissions(rawValue: 0x003f_0000)
    /// Every group bit (C: `KEY_GRP_ALL`).
    public static let groupAll = KeyPermissions(rawValue: 0x0000_3f00)
    /// Every other bit (C: `KEY_OTH_ALL`).
    public static let otherAll = KeyPermissions(rawValue: 0x0000_003f)

    /// The project's mask for class keys and their keyrings: possessor all, same uid view/read/search, group and other nothing (`0x3f0b0000`).
    ///
    /// Why: the kernel's default for a `user` key gives a same-uid process
    /// that does not *possess* the key only `view`, so a key added from one
    /// session is unreadable from another (a daemon, a second shell) and from
    /// the same process once its throw-away session keyring is gone. The uid
    /// is the real boundary anyway (a same-uid process can ptrace), so the
    /// owner gets view, read and search. It does not get write, link or
    /// setattr: only a possessor (the process that unlocked) can replace the
    /// payload, re-link the key elsewhere or change its permissions or
    /// timeout. Other uids and the group get nothing; root gets no read
    /// override either.
    public static let privateToOwner: KeyPermissions = [
        .possessorAll, .userView, .userRead, .userSearch,
    ]

    /// The mask in hex, as `keyctl describe` prints it (e.g. `3f0b0000`).
    public var description: String {
        let hex = String(rawValue, radix: 16)
        return String(repeating: "0", count: max(0, 8 - hex.count)) + hex
    }
}
