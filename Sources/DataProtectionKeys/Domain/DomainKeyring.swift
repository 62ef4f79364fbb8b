import DataProtectionFormat
import SystemLayer
import KernelKeyring
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif

/// Which keyring a domain's keys are linked into.
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

/// A domain's keys in the kernel keyring: at most two `user` keys, linked straight into `@u` (or `@s`).
///
/// - `dataprotection:<id>` holds every unlocked class key that does not expire: C always, A and B when unlocked
///   without a timeout. It never has a kernel timeout.
/// - `dataprotection:<id>:expiring` holds A and B after `unlock --timeout`, with the deadline in its payload and the
///   kernel's timeout set to it, so they vanish from the kernel at the deadline even if no process is left to lock.
///
/// Each payload is a `DomainKeyPayload`. So an unlocked domain costs the uid one key of its kernel quota (two with a
/// timeout), where the old layout cost a keyring and a key per class.
///
/// Permissions: `privateToOwner` plus owner write and setattr (0x3f2f0000). The same uid may find, read, update and
/// time out the keys without possessing them — a `lock` from another session replaces the payload in place
/// (`keyctl_update`) — which gives it nothing it lacked: it can read them, and a same-uid process can ptrace.
/// Other uids get nothing. A key is made in this process's keyring `@p` (where this process possesses it, so it may
/// set its permissions and timeout), then linked into the parent and unlinked from `@p`.
package struct DomainKeyring: Sendable {
    let keyring: Keyring
    let id: DomainID
    let parent: KeyringParent

    /// The two keys of a domain.
    enum Slot: CaseIterable { case lasting, expiring }

    static let permissions: KeyPermissions = KeyPermissions.privateToOwner.union([.userWrite, .userSetAttribute])

    func name(_ slot: Slot) -> String { slot == .lasting ? "dataprotection:\(id)" : "dataprotection:\(id):expiring" }

    /// The serial of the domain's key in `slot`, or nil when it is absent, expired or revoked.
    func find(_ slot: Slot) throws(ProtectionError) -> KeySerial? { try find(.user, name(slot)) }

    /// The serial of a key by type and description under the parent, or nil when it is absent, expired or revoked.
    func find(_ type: KeyType, _ description: String) throws(ProtectionError) -> KeySerial? {
        do throws(KeyringError) { return try keyring.search(parent.serial, type: type, description: description) } catch {
            if [.notFound, .expired, .revoked].contains(error.code) { return nil }
            throw Self.translate(error)
        }
    }

    /// Reads a domain key's payload into locked memory and runs `body` on it; nil when the key is gone (locked,
    /// expired, replaced). One `keyctl_read` into a pooled buffer: no allocation beyond the `SecretBytes` slot.
    func withPayload<R: ~Copyable>(_ serial: KeySerial, _ body: (UnsafeRawBufferPointer) throws(ProtectionError) -> R) throws(ProtectionError) -> R? {
        var capacity = DomainKeyPayload.typicalCapacity
        for _ in 0..<4 {
            var s = try crypto { () throws(CryptoError) in try SecretBytes(zeroedCount: capacity) }
            let n: Int
            do throws(KeyringError) {
                n = try s.withUnsafeMutableBytes { (b) throws(KeyringError) in try keyring.read(serial, into: b) }
            } catch {
                if case .bufferTooSmall(let required) = error.code { capacity = required; continue }  // grew meanwhile: again
                if [.notFound, .expired, .revoked, .permissionDenied].contains(error.code) { return nil }
                throw Self.translate(error)
            }
            return try s.withUnsafeBytes { (b) throws(ProtectionError) in try body(UnsafeRawBufferPointer(rebasing: b[0..<n])) }
        }
        return nil
    }

    /// Makes the key of `slot` with `payload` (and a kernel timeout, if given) and links it into the parent.
    /// - Throws: the quota error (`KeyQuota.exhausted`) when the uid's key quota is used up.
    func create(_ slot: Slot, payload: borrowing SecretBytes, timeout: UInt32?) throws(ProtectionError) -> KeySerial {
        try checkParent()
        do throws(KeyringError) {
            let k = try payload.withUnsafeBytes { (b) throws(KeyringError) in
                try keyring.add(.user, description: name(slot), payload: b, to: .process, permissions: Self.permissions)
            }
            if let timeout { try keyring.setTimeout(k, seconds: timeout) }
            do throws(KeyringError) { try keyring.link(k, into: parent.serial) } catch {
                try? keyring.invalidate(k)
                throw error
            }
            try? keyring.unlink(k, from: .process)  // @p dies with this process; a long-lived one should not keep every key linked
            return k
        } catch { throw quotaAware(error, adding: payload.count, slot: slot) }
    }

    /// Replaces the payload of the existing key `serial` in place, then sets its kernel timeout again if given
    /// (an update clears it).
    func update(_ serial: KeySerial, _ slot: Slot, payload: borrowing SecretBytes, timeout: UInt32?) throws(ProtectionError) {
        do throws(KeyringError) {
            try payload.withUnsafeBytes { (b) throws(KeyringError) in try keyring.update(serial, payload: b) }
            if let timeout { try keyring.setTimeout(serial, seconds: timeout) }
        } catch { throw quotaAware(error, adding: payload.count, slot: slot) }
    }

    /// Invalidates a key; one already gone is fine.
    func invalidate(_ k: KeySerial) throws(ProtectionError) {
        do throws(KeyringError) { try keyring.invalidate(k) } catch {
            if [.notFound, .expired, .revoked].contains(error.code) { return }
            throw Self.translate(error)
        }
    }

    /// Refuses `@s` when this process has no session keyring of its own.
    private func checkParent() throws(ProtectionError) {
        guard parent == .session else { return }
        // Without a session keyring of its own, `@s` is the user-session keyring for lookups,
        // but linking into it makes the kernel create a throw-away one that dies with this process.
        let own = try? keyring.id(of: .session), fallback = try? keyring.id(of: .userSession)
        guard let own, own != fallback else {
            throw ProtectionError(.invalidArgument, "DATAPROTECTION_KEYRING=session, but this process has no session keyring of its own, so the keys would vanish when it exits; run it inside `keyctl session - …` (or a login session with pam_keyinit), or unset DATAPROTECTION_KEYRING to use the user keyring")
        }
    }

    /// Translates a failure to add or grow a domain key; the quota error says which sysctl to raise.
    private func quotaAware(_ e: KeyringError, adding bytes: Int, slot: Slot) -> ProtectionError {
        guard e.code == .quotaExceeded else { return Self.translate(e) }
        return KeyQuota.exhausted(domain: id, adding: KeyQuota.Need(keys: 1, bytes: name(slot).utf8.count + 1 + bytes), underlying: e)
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
