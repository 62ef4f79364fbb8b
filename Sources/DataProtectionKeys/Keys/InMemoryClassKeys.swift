import ProtectionCrypto
import DataProtectionTelemetry
import Locking
import Synchronization

/// Class keys held in this process's locked memory, with their own lock: the explicit in-process key store.
///
/// For single-process embedding where the kernel keyring is refused (a
/// container whose seccomp profile blocks `keyctl`), and for tests. It is
/// never chosen silently: callers construct it by name. Other processes
/// cannot see these keys. `lock(_:)` works like a domain's lock within this
/// process: it marks the classes locked, drops their secret halves, and wipes
/// the keys of every open `complete` (and, if locked,
/// `completeUntilFirstUserAuthentication`) handle opened with these keys
/// before it returns.
public final class InMemoryClassKeys: ClassKeys, KeyHolder, @unchecked Sendable {  // @unchecked: immutable lets of Sendable types
    private let table: InMemoryKeyTable
    private let lockState: InProcessLockState

    /// Holds `keys` (any generations of any classes); the highest generation per class is current.
    public init(_ keys: [ClassKey]) {
        let table = InMemoryKeyTable(keys)
        let lockState = InProcessLockState()
        self.table = table
        self.lockState = lockState
        super.init(provider: table, revocation: Revocation(state: lockState, telemetry: .detached()))
    }

    /// Fresh random keys for all four classes, generation 1.
    public static func random() throws(ProtectionError) -> InMemoryClassKeys {
        var ks: [ClassKey] = []
        for c in ProtectionClass.allCases { ks.append(try ClassKey.generate(c)) }
        return InMemoryClassKeys(ks)
    }

    /// Locks `classes`: marks them locked, drops their secret halves (class B keeps its public key) and revokes every
    /// handle of a locked class A or C opened with these keys, waiting for operations in flight.
    public func lock(_ classes: Set<ProtectionClass> = [.complete, .completeUnlessOpen]) {
        lockState.lock(classes)
        table.revoke { classes.contains($0) }
        revocation.revokeLocked()
    }

    /// Locks the classes `locked` names (`KeyHolder`: a rotation's copy of a domain's keys locks with the domain).
    package func revoke(where locked: (ProtectionClass) -> Bool) {
        lock(Set(ProtectionClass.allCases.filter(locked)))
    }

    /// Installs keys (e.g. after unlock), replacing same-class same-generation entries, and marks their classes unlocked.
    public func install(_ newKeys: [ClassKey]) {
        table.install(newKeys)
        lockState.unlock(Set(newKeys.map(\.protectionClass)))
    }

    /// Number of open handles holding keys from this store.
    public var openHandleCount: Int { revocation.holderCount }
}

/// Class keys by class and generation in locked memory: the provider behind `InMemoryClassKeys`, and the temporary
/// key set of a rotation (registered with the domain's revocation, so a lock during it drops them too).
final class InMemoryKeyTable: ClassKeyProvider, KeyHolder {
    private let keys: Locked<[ProtectionClass: [UInt32: ClassKey]]>
    private let current: Locked<[ProtectionClass: UInt32]>

    init(_ keys: [ClassKey]) {
        var table: [ProtectionClass: [UInt32: ClassKey]] = [:]
        var cur: [ProtectionClass: UInt32] = [:]
        for k in keys {
            table[k.protectionClass, default: [:]][k.generation] = k
            cur[k.protectionClass] = max(cur[k.protectionClass] ?? 0, k.generation)
        }
        self.keys = Locked(table)
        self.current = Locked(cur)
    }

    /// Drops the secret halves of every class `locked` names (class B keeps its public key).
    func revoke(where locked: (ProtectionClass) -> Bool) {
        keys.withLock { table in
            for (c, gens) in table where locked(c) {
                var kept: [UInt32: ClassKey] = [:]
                for (g, k) in gens { if let p = k.publicOnly() { kept[g] = p } }
                table[c] = kept
            }
        }
    }

    func install(_ newKeys: [ClassKey]) {
        keys.withLock { table in
            for k in newKeys { table[k.protectionClass, default: [:]][k.generation] = k }
        }
        current.withLock { cur in
            for k in newKeys { cur[k.protectionClass] = max(cur[k.protectionClass] ?? 0, k.generation) }
        }
    }

    private func key(_ c: ProtectionClass, _ g: UInt32) -> ClassKey? { keys.withLock { $0[c]?[g] } }

    func currentGeneration(of c: ProtectionClass) throws(ProtectionError) -> UInt32 {
        guard let g = current.withLock({ $0[c] }) else { throw .locked(c) }
        return g
    }

    func wrapFileKey(
        _ fileKey: borrowing SecretBytes, for c: ProtectionClass, generation: UInt32, ad: UnsafeRawBufferPointer
    ) throws(ProtectionError) -> [UInt8] {
        guard let k = key(c, generation) else { throw .locked(c) }
        return try k.wrap(fileKey, ad: ad)
    }

    func unwrapFileKey(
        _ wrapped: UnsafeRawBufferPointer, for c: ProtectionClass, generation: UInt32, ad: UnsafeRawBufferPointer
    ) throws(ProtectionError) -> SecretBytes {
        let (k, unlocked): (ClassKey?, Bool) = keys.withLock { t in (t[c]?[generation], t[c]?.values.contains { $0.canUnwrap } ?? false) }
        guard let k, k.canUnwrap else {
            // Unlocked but without this generation: the header names a key this domain never had.
            if unlocked { throw .unknownGeneration(c, generation) }
            throw .locked(c)
        }
        return try k.unwrap(wrapped, ad: ad)
    }
}

/// The lock state of an `InMemoryClassKeys`: which classes are locked, and an epoch advanced by every lock.
final class InProcessLockState: RevocationState {
    private let lockedMask = Atomic<UInt64>(0)
    private let counter = Atomic<UInt64>(0)

    var epoch: UInt64 { counter.load(ordering: .sequentiallyConsistent) }

    func revokes(_ c: ProtectionClass) -> Bool {
        (c == .complete || c == .completeUntilFirstUserAuthentication) && lockedMask.load(ordering: .sequentiallyConsistent) & (1 << UInt64(c.rawValue)) != 0
    }

    /// Marks `classes` locked, then advances the epoch (the same order as the shared page).
    func lock(_ classes: Set<ProtectionClass>) {
        lockedMask.bitwiseOr(LiveState.mask(classes), ordering: .sequentiallyConsistent)
        counter.add(1, ordering: .sequentiallyConsistent)
    }

    func unlock(_ classes: Set<ProtectionClass>) {
        lockedMask.bitwiseAnd(~LiveState.mask(classes), ordering: .sequentiallyConsistent)
    }
}
