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

/// Class keys in the kernel keyring (one key per domain, two with a timeout: `DomainKeyring`), read into locked
/// memory on each use.
///
/// The store caches only key serials, never key bytes: `lock` in another process
/// replaces the payload (or invalidates the key), and the next read no longer finds
/// the class key (≈ 1.1 µs per read, plus a search after a miss). The domain's
/// provider keeps what it read in `ClassKeyCache`, good until the live lock's
/// epoch moves: a lock anywhere moves it before it touches this store.
package final class KernelKeyStore: ClassKeyStore {
    let ring: DomainKeyring
    let legacy: LegacyDomainKeyring
    let writeLock: KeyStoreWriteLock
    /// The serial of each slot's key, as last found.
    private let serials = Locked<[DomainKeyring.Slot: KeySerial]>([:])

    /// The store in domain `id`'s keys under `parent`, through `keyring`; writers serialise on a lock in `lockDirectory`
    /// (the domain's private runtime directory).
    package init(_ keyring: Keyring, id: DomainID, parent: KeyringParent, lockDirectory: String) {
        ring = DomainKeyring(keyring: keyring, id: id, parent: parent)
        legacy = LegacyDomainKeyring(ring: ring)
        writeLock = KeyStoreWriteLock(directory: lockDirectory)
    }

    package func secret(_ c: ProtectionClass, _ g: UInt32) throws(ProtectionError) -> SecretBytes? {
        for slot in DomainKeyring.Slot.allCases {
            var found: SecretBytes? = nil
            try withKey(slot) { (p) throws(ProtectionError) in
                guard let at = DomainKeyPayload.offset(of: c, g, in: p) else { return }
                found = try crypto { () throws(CryptoError) in try SecretBytes(copying: UnsafeRawBufferPointer(rebasing: p[at..<at + 32])) }
            }
            if found != nil { return found }
        }
        return nil
    }

    /// Runs `body` on the payload of `slot`'s key; returns the key's serial, or nil when there is no such key.
    /// A cached serial that no longer reads (the key was invalidated and perhaps made anew) is looked up again once.
    @discardableResult
    private func withKey(_ slot: DomainKeyring.Slot, _ body: (UnsafeRawBufferPointer) throws(ProtectionError) -> Void) throws(ProtectionError) -> KeySerial? {
        if let cached = serials.withLock({ $0[slot] }) {
            if try ring.withPayload(cached, body) != nil { return cached }
            serials.withLock { _ = $0.removeValue(forKey: slot) }
        }
        guard let serial = try ring.find(slot), try ring.withPayload(serial, body) != nil else { return nil }
        serials.withLock { $0[slot] = serial }
        return serial
    }

    package func install(_ keys: [ClassKey], timeout: UInt32?) throws(ProtectionError) {
        let keys = keys.filter { $0.protectionClass != .none }
        // An unlock installs every generation of A, B and C: it replaces what is there and sets (or clears) the
        // auto-lock deadline. A rotation adds one generation to whichever key holds its class.
        let unlock = Set(keys.map(\.protectionClass)) == [.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication]
        let expiring = timeout == nil ? [] : keys.filter { $0.protectionClass != .completeUntilFirstUserAuthentication }
        let lasting = keys.filter { k in !expiring.contains { $0 === k } }
        let now = Int64(time(nil))
        try writeLock.hold { () throws(ProtectionError) in
            // Where A and B move between the keys, the new holder is written before the old one drops them:
            // a reader always finds them in one or the other.
            if let timeout, !expiring.isEmpty {
                try rewrite(.expiring, keeping: { _ in !unlock }, adding: expiring, deadline: unlock ? .set(now + Int64(timeout)) : .keep(fallback: now + Int64(timeout)))
            }
            if !lasting.isEmpty || unlock {
                try rewrite(.lasting, keeping: { _ in !unlock }, adding: lasting, deadline: .none)
            }
            if unlock && timeout == nil { try rewrite(.expiring, keeping: { _ in false }, adding: [], deadline: .none) }
            if unlock { try legacy.evict(Set(ProtectionClass.allCases), generations: [:], all: true) }  // an older dpctl's keys: replaced by these
        }
    }

    package func evict(_ classes: Set<ProtectionClass>, generations: [ProtectionClass: [UInt32]], all: Bool) throws(ProtectionError) {
        try writeLock.hold { () throws(ProtectionError) in
            for slot in DomainKeyring.Slot.allCases {
                // Lock of A and B: the lasting key is rewritten in place with C alone (C stays readable throughout);
                // the expiring key holds only A and B, so it goes, and the deadline with it.
                try rewrite(slot, keeping: { !all && !classes.contains($0.protectionClass) }, adding: [], deadline: .keep(fallback: nil))
            }
            try legacy.evict(all ? Set(ProtectionClass.allCases) : classes, generations: generations, all: all)
        }
        serials.withLock { $0.removeAll() }
    }

    package func retire(_ c: ProtectionClass, generations: [UInt32]) throws(ProtectionError) {
        try writeLock.hold { () throws(ProtectionError) in
            for slot in DomainKeyring.Slot.allCases {
                try rewrite(slot, keeping: { !($0.protectionClass == c && generations.contains($0.generation)) }, adding: [], deadline: .keep(fallback: nil))
            }
        }
    }

    /// The deadline a rewrite records: none, a new one, or the key's own (else `fallback`).
    private enum DeadlineChoice { case none, set(Int64), keep(fallback: Int64?) }

    /// Replaces `slot`'s key with its entries that `keep` accepts plus `adding`: updated in place, made, or
    /// invalidated when nothing remains. Holds the write lock; reads the key afresh (not through the cache).
    private func rewrite(
        _ slot: DomainKeyring.Slot, keeping keep: (DomainKeyPayload.Entry) -> Bool, adding: [ClassKey], deadline choice: DeadlineChoice
    ) throws(ProtectionError) {
        func apply(_ serial: KeySerial?, _ old: UnsafeRawBufferPointer) throws(ProtectionError) {
            let deadline: Int64?
            switch choice {
            case .none: deadline = nil
            case .set(let d): deadline = d
            case .keep(let fallback): deadline = DomainKeyPayload.deadline(old) ?? fallback
            }
            // The kernel's timeout is the deadline itself (an update clears it, so it is set again each time).
            let timeout = deadline.map { UInt32(clamping: max(1, $0 - Int64(time(nil)))) }
            let built = try DomainKeyPayload.build(from: old, keeping: keep, adding: adding, deadline: deadline)
            switch consume built {
            case .some(let p):
                if let serial {
                    try self.ring.update(serial, slot, payload: p, timeout: timeout)
                } else {
                    let new = try self.ring.create(slot, payload: p, timeout: timeout)
                    self.serials.withLock { $0[slot] = new }
                }
            case .none:
                if let serial { try self.ring.invalidate(serial) }
            }
        }
        if let serial = try ring.find(slot), try ring.withPayload(serial, { (old) throws(ProtectionError) in try apply(serial, old) }) != nil { return }
        try apply(nil, UnsafeRawBufferPointer(start: nil, count: 0))  // no key (or it expired between the search and the read)
    }

    package func serial(_ c: ProtectionClass, _ g: UInt32) throws(ProtectionError) -> Int32? {
        for slot in DomainKeyring.Slot.allCases {
            var has = false
            let s = try withKey(slot) { has = DomainKeyPayload.offset(of: c, g, in: $0) != nil }
            if has, let s { return s.rawValue }
        }
        return nil
    }
    package func isPresent(_ c: ProtectionClass, _ g: UInt32) throws(ProtectionError) -> Bool { try serial(c, g) != nil }
    package func deadline() throws(ProtectionError) -> Int64? {
        var d: Int64? = nil
        try withKey(.expiring) { d = DomainKeyPayload.deadline($0) }
        return d
    }
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

    /// Drops every key this store holds (a service's shutdown): each `ClassKey`'s secret zeroes itself as it goes.
    package func wipeAll() {
        keys.withLock { $0.removeAll() }
        expiry.withLock { $0 = nil }
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
