import ProtectionCrypto
import Locking

/// Class keys held in this process's locked memory: the explicit in-process key store.
///
/// For single-process embedding where the kernel keyring is refused (a
/// container whose seccomp profile blocks `keyctl`), and for tests. It is
/// never chosen silently: callers construct it by name. Locking drops the
/// secret halves of the locked classes; other processes cannot see these keys.
public final class InMemoryClassKeys: ClassKeyProvider {
    private let keys: Locked<[ProtectionClass: [UInt32: ClassKey]]>
    private let current: Locked<[ProtectionClass: UInt32]>

    /// Holds `keys` (any generations of any classes); the highest generation per class is current.
    public init(_ keys: [ClassKey]) {
        var table: [ProtectionClass: [UInt32: ClassKey]] = [:]
        var cur: [ProtectionClass: UInt32] = [:]
        for k in keys {
            table[k.protectionClass, default: [:]][k.generation] = k
            cur[k.protectionClass] = max(cur[k.protectionClass] ?? 0, k.generation)
        }
        self.keys = Locked(table)
        self.current = Locked(cur)
    }

    /// Fresh random keys for all four classes, generation 1.
    public static func random() throws(ProtectionError) -> InMemoryClassKeys {
        var ks: [ClassKey] = []
        for c in ProtectionClass.allCases { ks.append(try ClassKey.generate(c)) }
        return InMemoryClassKeys(ks)
    }

    /// Drops the secret halves of `classes` (class B keeps its public key).
    public func lock(_ classes: Set<ProtectionClass> = [.complete, .completeUnlessOpen]) {
        keys.withLock { table in
            for c in classes {
                guard let gens = table[c] else { continue }
                var kept: [UInt32: ClassKey] = [:]
                for (g, k) in gens { if let p = k.publicOnly() { kept[g] = p } }
                table[c] = kept
            }
        }
    }

    /// Installs keys (e.g. after unlock), replacing same-class same-generation entries.
    public func install(_ newKeys: [ClassKey]) {
        keys.withLock { table in
            for k in newKeys { table[k.protectionClass, default: [:]][k.generation] = k }
        }
        current.withLock { cur in
            for k in newKeys { cur[k.protectionClass] = max(cur[k.protectionClass] ?? 0, k.generation) }
        }
    }

    func key(_ c: ProtectionClass, _ g: UInt32) -> ClassKey? { keys.withLock { $0[c]?[g] } }

    public func currentGeneration(of c: ProtectionClass) throws(ProtectionError) -> UInt32 {
        guard let g = current.withLock({ $0[c] }) else { throw .locked(c) }
        return g
    }

    public func wrapFileKey(
        _ fileKey: borrowing SecretBytes, for c: ProtectionClass, generation: UInt32, ad: UnsafeRawBufferPointer
    ) throws(ProtectionError) -> [UInt8] {
        guard let k = key(c, generation) else { throw .locked(c) }
        return try k.wrap(fileKey, ad: ad)
    }

    public func unwrapFileKey(
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
