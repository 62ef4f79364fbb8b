import DataProtectionFormat
import SystemLayer
import KernelKeyring
import ProtectionCrypto

/// Which keyring a domain's named keyring is linked into.
public enum KeyringParent: String, Sendable, CaseIterable {
    /// The user keyring `@u`: shared by every process of the uid, the default.
    case user
    /// The session keyring `@s`: for tests and single-session tools (`keyctl session -`).
    case session

    var serial: KeySerial { self == .user ? .user : .session }

    /// `$DATAPROTECTION_KEYRING` (`user` or `session`), else `.user`.
    /// - Throws: `.invalidArgument` for another value.
    public static func from(environment: [String: String]) throws(ProtectionError) -> KeyringParent {
        guard let v = environment["DATAPROTECTION_KEYRING"], !v.isEmpty else { return .user }
        guard let p = KeyringParent(rawValue: v) else {
            throw ProtectionError(.invalidArgument, "DATAPROTECTION_KEYRING is '\(v)'; it must be `user` or `session`")
        }
        return p
    }
}

/// A domain's class keys in the kernel keyring: a keyring `dataprotection:<id>` holding `user` keys `dataprotection:<id>:<class>:<generation>`.
///
/// Possession trap (KernelKeyring README): a process whose session keyring
/// does not reach `@u` does not *possess* keys it finds there, so it could not
/// set their permissions or timeouts. Writers therefore first link the named
/// keyring into their own process keyring `@p` (which dies with them); it
/// grants the same uid `link` and `write` for that reason. Keys are
/// `privateToOwner`: the same uid may find and read them, other uids nothing.
package struct DomainKeyring: Sendable {
    let keyring: Keyring
    let id: DomainID
    let parent: KeyringParent

    static let ringPermissions: KeyPermissions = KeyPermissions.privateToOwner.union([.userWrite, .userLink])

    var ringName: String { "dataprotection:\(id)" }
    func keyName(_ c: ProtectionClass, _ g: UInt32) -> String { "dataprotection:\(id):\(c.name):\(g)" }
    var deadlineName: String { "dataprotection:\(id):auto-lock-deadline" }

    /// The domain keyring, or nil if it does not exist (never unlocked, or evicted).
    func findRing() throws(ProtectionError) -> KeySerial? {
        do throws(KeyringError) { return try keyring.search(parent.serial, type: .keyring, description: ringName) } catch {
            if [.notFound, .expired, .revoked].contains(error.code) { return nil }
            throw Self.translate(error)
        }
    }

    /// The domain keyring, created if needed, and possessed by this process through `@p`.
    func ringForWriting() throws(ProtectionError) -> KeySerial {
        if parent == .session {
            // Without a session keyring of its own, `@s` is the user-session keyring for lookups,
            // but linking into it makes the kernel create a throw-away one that dies with this process.
            let own = try? keyring.id(of: .session), fallback = try? keyring.id(of: .userSession)
            guard let own, own != fallback else {
                throw ProtectionError(.invalidArgument, "DATAPROTECTION_KEYRING=session, but this process has no session keyring of its own, so the keys would vanish when it exits; run it inside `keyctl session - …` (or a login session with pam_keyinit), or unset DATAPROTECTION_KEYRING to use the user keyring")
            }
        }
        let existing = try findRing()
        do throws(KeyringError) {
            if let ring = existing {
                try keyring.link(ring, into: .process)
                return ring
            }
            let ring = try keyring.add(.keyring, description: ringName, payload: UnsafeRawBufferPointer(start: nil, count: 0), to: .process, permissions: Self.ringPermissions)
            try keyring.link(ring, into: parent.serial)
            return ring
        } catch { throw Self.translate(error) }
    }

    /// Drops the `@p` link `ringForWriting` made, so a long-lived process does not keep every domain it unlocked linked (and counted against the uid's key quota).
    func releasePossession(of ring: KeySerial) {
        try? keyring.unlink(ring, from: .process)
    }

    /// Puts a class key's secret into the domain keyring, expiring after `timeout` seconds if given.
    @discardableResult
    func install(_ key: ClassKey, in ring: KeySerial, timeout: UInt32?) throws(ProtectionError) -> KeySerial {
        guard let s = key.secret else { throw ProtectionError.locked(key.protectionClass) }
        do throws(KeyringError) {
            let serial = try s.secret.withUnsafeBytes { (b) throws(KeyringError) in
                try keyring.add(.user, description: keyName(key.protectionClass, key.generation), payload: b, to: ring, permissions: .privateToOwner)
            }
            try keyring.setTimeout(serial, seconds: timeout ?? 0)
            return serial
        } catch { throw Self.translate(error) }
    }

    /// Records the auto-lock deadline (public: UNIX seconds as text) in a key that expires with the class keys.
    func installDeadline(_ deadline: Int64?, in ring: KeySerial, timeout: UInt32?) throws(ProtectionError) {
        let old = try find(deadlineName)
        do throws(KeyringError) {
            if let deadline, let timeout {
                let k = try Array(String(deadline).utf8).span.bytes.withUnsafeBytes { (b) throws(KeyringError) in
                    try keyring.add(.user, description: deadlineName, payload: b, to: ring, permissions: .privateToOwner)
                }
                try keyring.setTimeout(k, seconds: timeout)
            } else if let k = old {
                try keyring.invalidate(k)
            }
        } catch { throw Self.translate(error) }
    }

    /// The auto-lock deadline, if one is set and not yet passed.
    func deadline() throws(ProtectionError) -> Int64? {
        guard let k = try find(deadlineName) else { return nil }
        var buf = [UInt8](repeating: 0, count: 32)
        let r: Result<Int, KeyringError> = buf.withUnsafeMutableBytes { b in
            do throws(KeyringError) { return .success(try keyring.read(k, into: b)) } catch { return .failure(error) }
        }
        switch r {
        case .success(let n): return Int64(String(decoding: buf[0..<n], as: UTF8.self))
        case .failure(let error):
            if [.notFound, .expired, .revoked].contains(error.code) { return nil }
            throw Self.translate(error)
        }
    }

    /// The serial of a key by description, or nil when it is absent, expired or revoked.
    func find(_ description: String) throws(ProtectionError) -> KeySerial? {
        do throws(KeyringError) { return try keyring.search(parent.serial, type: .user, description: description) } catch {
            if [.notFound, .expired, .revoked].contains(error.code) { return nil }
            throw Self.translate(error)
        }
    }

    /// Reads a class key's 32 secret bytes into locked memory; nil when the key is gone (locked, expired).
    func read(_ serial: KeySerial) throws(ProtectionError) -> SecretBytes? {
        var s = try crypto { () throws(CryptoError) in try SecretBytes(zeroedCount: 32) }
        do throws(KeyringError) {
            let n = try s.withUnsafeMutableBytes { (b) throws(KeyringError) in try keyring.read(serial, into: b) }
            guard n == 32 else { return nil }
        } catch {
            if [.notFound, .expired, .revoked, .permissionDenied].contains(error.code) { return nil }
            if case .bufferTooSmall = error.code { return nil }
            throw Self.translate(error)
        }
        return s
    }

    /// Invalidates every generation of `classes` (given the generations the keybag lists), and the deadline record if asked.
    func evict(_ classes: Set<ProtectionClass>, generations: [ProtectionClass: [UInt32]], deadline: Bool = true) throws(ProtectionError) {
        for c in classes {
            for g in generations[c] ?? [] {
                if let k = try find(keyName(c, g)) { try invalidate(k) }
            }
        }
        if deadline, let k = try find(deadlineName) { try invalidate(k) }
    }

    /// Invalidates the whole domain keyring (and with it every key only it holds).
    func evictAll(generations: [ProtectionClass: [UInt32]]) throws(ProtectionError) {
        try evict(Set(ProtectionClass.allCases), generations: generations)
        if let ring = try findRing() { try invalidate(ring) }
    }

    private func invalidate(_ k: KeySerial) throws(ProtectionError) {
        do throws(KeyringError) { try keyring.invalidate(k) } catch {
            if [.notFound, .expired, .revoked].contains(error.code) { return }
            throw Self.translate(error)
        }
    }

    /// Translates a keyring failure; a refused keyring becomes the one clear `.keyringUnavailable` error.
    package static func translate(_ e: KeyringError) -> ProtectionError {
        if e.code == .unavailable { return unavailable(e) }
        return ProtectionError(.io(e.errno == 0 ? EIO : e.errno), "kernel keyring: \(e.message)", underlying: e)
    }

    package static func unavailable(_ e: KeyringError) -> ProtectionError {
        ProtectionError(.keyringUnavailable, "the kernel keyring is refused to this process (\(e.operation) failed: a seccomp profile, e.g. a container's, blocks add_key/keyctl); allow those system calls (e.g. `docker run --security-opt seccomp=…` with add_key, keyctl and request_key permitted), or, when embedding the library in a single process, open the domain with `keyStore: .inProcess`", underlying: e)
    }
}

#if canImport(Glibc)
import Glibc
#endif
