import DataProtectionFormat
import KernelKeyring
import ProtectionCrypto
import Locking

/// Where an unlocked domain keeps the secret halves of its class keys A, B and C.
///
/// Chosen explicitly when a domain is opened, never silently.
public enum KeyStore: Sendable, Equatable {
    /// The Linux kernel keyring, under `@u` or `@s` (the default: `.kernel(.user)`).
    case kernel(KeyringParent)
    /// This process's locked memory only: for single-process embedding where the keyring is refused.
    /// Other processes cannot see the keys, and they vanish with the process.
    case inProcess
}

/// Holds the secret halves of unlocked class keys, by class and generation.
package protocol ClassKeyStore: Sendable {
    /// The secret of generation `g` of `c`, or nil when it is not there (locked).
    func secret(_ c: ProtectionClass, _ g: UInt32) throws(ProtectionError) -> SecretBytes?
    /// Installs `keys`, expiring after `timeout` seconds when given (classes A and B only; C never expires).
    func install(_ keys: [ClassKey], timeout: UInt32?) throws(ProtectionError)
    /// Locks: removes every generation of `classes` and the auto-lock deadline; `all` also removes the store itself.
    func evict(_ classes: Set<ProtectionClass>, generations: [ProtectionClass: [UInt32]], all: Bool) throws(ProtectionError)
    /// Removes retired generations of `c` after a rotation, leaving the lock state as it is.
    func retire(_ c: ProtectionClass, generations: [UInt32]) throws(ProtectionError)
    /// The kernel key serial of generation `g` of `c`, if it is unlocked (nil for the in-process store).
    func serial(_ c: ProtectionClass, _ g: UInt32) throws(ProtectionError) -> Int32?
    /// Whether generation `g` of `c` is present.
    func isPresent(_ c: ProtectionClass, _ g: UInt32) throws(ProtectionError) -> Bool
    /// The auto-lock deadline (UNIX seconds), if set.
    func deadline() throws(ProtectionError) -> Int64?
}

/// Class keys in the kernel keyring, read into locked memory on each use.
///
/// Only key serials are cached, never key bytes: `lock` in another process
/// invalidates the keys, the next read fails, and this process sees the class
/// as locked at once (≈ 1.1 µs per read, plus a search after a miss).
package final class KernelKeyStore: ClassKeyStore {
    let ring: DomainKeyring
    /// Serials by class and generation (not by key name: building the name on every read cost six allocations).
    private struct Slot: Hashable { var c: ProtectionClass; var g: UInt32 }
    private let serials = Locked<[Slot: KeySerial]>([:])

    init(_ ring: DomainKeyring) { self.ring = ring }

    /// The store in domain `id`'s keyring under `parent`, through `keyring`.
    package convenience init(_ keyring: Keyring, id: DomainID, parent: KeyringParent) {
        self.init(DomainKeyring(keyring: keyring, id: id, parent: parent))
    }

    package func secret(_ c: ProtectionClass, _ g: UInt32) throws(ProtectionError) -> SecretBytes? {
        let slot = Slot(c: c, g: g)
        if let cached = serials.withLock({ $0[slot] }) {
            if let s = try ring.read(cached) { return s }
            serials.withLock { _ = $0.removeValue(forKey: slot) }
        }
        guard let serial = try ring.find(ring.keyName(c, g)) else { return nil }
        guard let s = try ring.read(serial) else { return nil }
        serials.withLock { $0[slot] = serial }
        return s
    }

    package func install(_ keys: [ClassKey], timeout: UInt32?) throws(ProtectionError) {
        let r = try ring.ringForWriting()
        defer { ring.releasePossession(of: r) }
        for k in keys where k.protectionClass != .none {
            let t = k.protectionClass == .completeUntilFirstUserAuthentication ? nil : timeout
            try ring.install(k, in: r, timeout: t)
        }
        if keys.contains(where: { $0.protectionClass == .complete }) {
            let deadline = timeout.map { Int64(time(nil)) + Int64($0) }
            try ring.installDeadline(deadline, in: r, timeout: timeout)
        }
    }

    package func evict(_ classes: Set<ProtectionClass>, generations: [ProtectionClass: [UInt32]], all: Bool) throws(ProtectionError) {
        if all { try ring.evictAll(generations: generations) } else { try ring.evict(classes, generations: generations) }
        serials.withLock { $0.removeAll() }
    }

    package func retire(_ c: ProtectionClass, generations: [UInt32]) throws(ProtectionError) {
        try ring.evict([c], generations: [c: generations], deadline: false)
        serials.withLock { $0.removeAll() }
    }

    package func serial(_ c: ProtectionClass, _ g: UInt32) throws(ProtectionError) -> Int32? { try ring.find(ring.keyName(c, g))?.rawValue }
    package func isPresent(_ c: ProtectionClass, _ g: UInt32) throws(ProtectionError) -> Bool { try serial(c, g) != nil }
    package func deadline() throws(ProtectionError) -> Int64? { try ring.deadline() }
}

/// Class keys in this process's locked memory (`KeyStore.inProcess`); timeouts are enforced on read.
package final class ProcessKeyStore: ClassKeyStore {
    private struct Entry { let key: ClassKey; let expiry: Int64? }
    private let keys = Locked<[String: Entry]>([:])
    private let expiry = Locked<Int64?>(nil)

    package init() {}

    private func name(_ c: ProtectionClass, _ g: UInt32) -> String { "\(c.rawValue):\(g)" }

    package func secret(_ c: ProtectionClass, _ g: UInt32) throws(ProtectionError) -> SecretBytes? {
        let now = Int64(time(nil))
        guard let e = keys.withLock({ t -> Entry? in
            guard let e = t[name(c, g)] else { return nil }
            if let x = e.expiry, x <= now { t.removeValue(forKey: name(c, g)); return nil }
            return e
        }), let s = e.key.secret else { return nil }
        return try crypto { () throws(CryptoError) in try s.secret.duplicate() }
    }

    package func install(_ newKeys: [ClassKey], timeout: UInt32?) throws(ProtectionError) {
        let x = timeout.map { Int64(time(nil)) + Int64($0) }
        keys.withLock { t in
            for k in newKeys where k.protectionClass != .none {
                t[name(k.protectionClass, k.generation)] = Entry(key: k, expiry: k.protectionClass == .completeUntilFirstUserAuthentication ? nil : x)
            }
        }
        if newKeys.contains(where: { $0.protectionClass == .complete }) { expiry.withLock { $0 = x } }
    }

    package func evict(_ classes: Set<ProtectionClass>, generations: [ProtectionClass: [UInt32]], all: Bool) throws(ProtectionError) {
        keys.withLock { t in
            for c in (all ? Set(ProtectionClass.allCases) : classes) {
                for g in generations[c] ?? [] { t.removeValue(forKey: name(c, g)) }
            }
        }
        expiry.withLock { $0 = nil }
    }

    package func retire(_ c: ProtectionClass, generations: [UInt32]) throws(ProtectionError) {
        keys.withLock { t in for g in generations { t.removeValue(forKey: name(c, g)) } }
    }

    package func serial(_ c: ProtectionClass, _ g: UInt32) throws(ProtectionError) -> Int32? { nil }
    package func isPresent(_ c: ProtectionClass, _ g: UInt32) throws(ProtectionError) -> Bool { try secret(c, g) != nil }
    package func deadline() throws(ProtectionError) -> Int64? {
        guard let x = expiry.withLock({ $0 }), x > Int64(time(nil)) else { return nil }
        return x
    }
}

#if canImport(Glibc)
import Glibc
#endif
