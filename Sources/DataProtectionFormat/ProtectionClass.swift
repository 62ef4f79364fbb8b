/// Apple's four Data Protection classes, with their format identifiers.
///
/// | class | after `lock` returns |
/// |---|---|
/// | `complete` (A) | opening fails `.locked`; open handles fail their next read or write |
/// | `completeUnlessOpen` (B) | opening an existing file fails; open handles keep working; creating succeeds |
/// | `completeUntilFirstUserAuthentication` (C) | available until `lock --evict-all` (the analogue of a reboot) |
/// | `none` (D) | always available (wrapped by the device secret) |
public enum ProtectionClass: UInt8, Sendable, CaseIterable, Codable, CustomStringConvertible {
    /// A: reachable only while unlocked; open handles fail their next call once the domain locks.
    case complete = 1
    /// B: files can be created while locked, and handles opened before the lock keep working until closed.
    case completeUnlessOpen = 2
    /// C: reachable from the first unlock until `lock --evict-all` (the analogue of a reboot).
    case completeUntilFirstUserAuthentication = 3
    /// D: always reachable; its key is wrapped by the device secret alone.
    case none = 4

    /// The name used by the CLI and in messages (Apple's names).
    public var name: String {
        switch self {
        case .complete: "complete"
        case .completeUnlessOpen: "completeUnlessOpen"
        case .completeUntilFirstUserAuthentication: "completeUntilFirstUserAuthentication"
        case .none: "none"
        }
    }

    /// Apple's single-letter class name (A–D).
    public var letter: Character {
        switch self {
        case .complete: "A"
        case .completeUnlessOpen: "B"
        case .completeUntilFirstUserAuthentication: "C"
        case .none: "D"
        }
    }

    /// Parses a name, a letter (A–D), or a common short form (`untilFirstAuth`).
    public init?(name: String) {
        let n = name.lowercased()
        if let c = ProtectionClass.allCases.first(where: { $0.name.lowercased() == n || String($0.letter).lowercased() == n }) {
            self = c
        } else if ["untilfirstauth", "untilfirstuserauthentication", "first-unlock", "c"].contains(n) {
            self = .completeUntilFirstUserAuthentication
        } else {
            return nil
        }
    }

    /// Whether the per-file key is sealed to a public key (class B can create while locked).
    public var usesPublicKeySealing: Bool { self == .completeUnlessOpen }

    /// The class's name, as `name`.
    public var description: String { name }
}
