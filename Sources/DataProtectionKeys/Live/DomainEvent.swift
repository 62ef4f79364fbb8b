/// What a domain tells embedding code about its lock state, in every process on the host.
///
/// The analogue of `UIApplication.protectedDataWillBecomeUnavailable` /
/// `protectedDataDidBecomeAvailable`.
public enum DomainEvent: Sendable, Equatable, CustomStringConvertible {
    /// The domain will lock at `deadline` (Unix milliseconds): finish or save work on
    /// `complete` files now.
    case willLock(deadlineUnixMillis: Int64)
    /// `classes` were locked: their keys are gone from the keyring and from every
    /// process's memory; `complete` handles fail with `.locked` until unlock.
    case didLock(Set<ProtectionClass>)
    /// The domain was unlocked: protected data is available again.
    case didUnlock

    public var description: String {
        switch self {
        case .willLock(let d): "willLock(in \(max(0, d - unixMillis())) ms)"
        case .didLock(let c): "didLock(\(c.map(\.name).sorted().joined(separator: ", ")))"
        case .didUnlock: "didUnlock"
        }
    }

    /// Wire form between processes (one datagram): `W <ms>`, `L <epoch> <mask>`, `U <mask>`.
    func encoded(epoch: UInt64 = 0) -> [UInt8] {
        switch self {
        case .willLock(let d): Array("W \(d)".utf8)
        case .didLock(let c): Array("L \(epoch) \(LiveState.mask(c))".utf8)
        case .didUnlock: Array("U".utf8)
        }
    }

    /// Parses a datagram; nil for anything else.
    static func decode(_ bytes: ArraySlice<UInt8>) -> (DomainEvent, epoch: UInt64)? {
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: " ")
        switch parts.first {
        case "W": if parts.count == 2, let d = Int64(parts[1]) { return (.willLock(deadlineUnixMillis: d), 0) }
        case "L":
            if parts.count == 3, let e = UInt64(parts[1]), let m = UInt64(parts[2]) {
                return (.didLock(Set(ProtectionClass.allCases.filter { m & (1 << UInt64($0.rawValue)) != 0 })), e)
            }
        case "U": return (.didUnlock, 0)
        default: break
        }
        return nil
    }
}
