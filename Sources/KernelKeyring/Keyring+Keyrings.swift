// Keyrings as containers: special keyrings, sessions, named keyrings, links and listings.
import Logging

extension Keyring {
    /// Resolves a special keyring (`.session`, `.user`…) to its real serial, creating it if asked.
    ///
    /// C: `keyctl_get_keyring_ID(keyring, create)`.
    ///
    /// - Parameters:
    ///   - keyring: a special value or a real serial.
    ///   - create: whether to create the keyring if the caller has none yet.
    /// - Throws: `KeyringError` with `notFound` if it does not exist and `create` is false.
    public func id(of keyring: KeySerial, create: Bool = false) throws(KeyringError) -> KeySerial {
        let id = try check(
            Int(system_keyctl_get_keyring_ID(keyring.rawValue, create)), .trace,
            "keyctl_get_keyring_ID", subject: KeyringSubject(key: keyring, type: .keyring),
            call: "keyctl_get_keyring_ID(\(keyring), \(create ? 1 : 0))")
        return KeySerial(rawValue: Int32(truncatingIfNeeded: id))
    }

    /// Makes the calling thread join a new anonymous session keyring and returns it.
    ///
    /// C: `keyctl_join_session_keyring(NULL)`, the analogue of `keyctl session -`.
    /// Trap: since Linux 3.x session keyrings are per-thread credentials, so
    /// only the calling thread (and threads and processes it starts afterwards)
    /// uses the new keyring; call it before starting other threads.
    ///
    /// - Throws: `KeyringError` (`quotaExceeded`, `unavailable`).
    @discardableResult
    public func joinNewSessionKeyring() throws(KeyringError) -> KeySerial {
        let id = try check(
            Int(system_keyctl_join_session_keyring(nil)), .debug, "keyctl_join_session_keyring",
            subject: KeyringSubject(key: .session, type: .keyring),
            call: "keyctl_join_session_keyring(NULL)")
        return KeySerial(rawValue: Int32(truncatingIfNeeded: id))
    }

    /// Returns a uid's persistent keyring, linking it into `keyring`.
    ///
    /// C: `keyctl_get_persistent(uid, keyring)`. The persistent keyring outlives
    /// every process of the uid until `/proc/sys/kernel/keys/persistent_keyring_expiry`
    /// seconds pass without it being fetched.
    ///
    /// - Parameters:
    ///   - uid: whose keyring; `nil` for the caller's own (another uid needs CAP_SETUID).
    ///   - keyring: where to link it; needs write permission.
    /// - Throws: `KeyringError` (`permissionDenied`, `io(EOPNOTSUPP)` if persistent keyrings are off).
    public func persistentKeyring(uid: UInt32? = nil, linkInto keyring: KeySerial) throws(KeyringError) -> KeySerial {
        let who = uid ?? UInt32.max
        let id = try check(
            system_keyctl_get_persistent(who, keyring.rawValue), .debug, "keyctl_get_persistent",
            subject: KeyringSubject(type: .keyring, description: "_persistent"),
            call: "keyctl_get_persistent(\(uid.map(String.init) ?? "-1"), \(keyring))")
        return KeySerial(rawValue: Int32(truncatingIfNeeded: id))
    }

    /// Finds the keyring named `name` in the tree below `parent`, or creates it linked into `parent`.
    ///
    /// C: `keyctl_search(parent, "keyring", name, 0)`, and if that finds
    /// nothing `add_key("keyring", name, NULL, 0, parent)` and
    /// `keyctl_setperm`. Trap: `add_key` of a keyring never reuses an existing
    /// one, it displaces it; hence the search first. Two processes racing to
    /// create the same name can still displace each other's keyring.
    ///
    /// - Parameters:
    ///   - name: the keyring's description; unique per domain.
    ///   - parent: where a new keyring is linked, and where the search starts.
    ///   - permissions: the mask for a keyring this call creates (an existing one keeps its own).
    /// - Returns: the keyring's serial.
    /// - Throws: `KeyringError` (`permissionDenied`, `quotaExceeded`, `invalidArgument`).
    public func keyring(
        named name: String, in parent: KeySerial, permissions: KeyPermissions
    ) throws(KeyringError) -> KeySerial {
        do {
            return try search(parent, type: .keyring, description: name)
        } catch where error.code == .notFound || error.code == .expired || error.code == .revoked {
            return try add(
                .keyring, description: name, payload: UnsafeRawBufferPointer(start: nil, count: 0),
                to: parent, permissions: permissions)
        }
    }

    /// Links a key into a keyring (the key then lives at least as long as that link).
    ///
    /// C: `keyctl_link(key, keyring)`.
    ///
    /// - Parameters:
    ///   - key: the key; needs link permission.
    ///   - keyring: the keyring; needs write permission.
    /// - Throws: `KeyringError` (`permissionDenied`, `notFound`, `quotaExceeded`).
    public func link(_ key: KeySerial, into keyring: KeySerial) throws(KeyringError) {
        _ = try check(
            system_keyctl_link(key.rawValue, keyring.rawValue), .debug, "keyctl_link",
            subject: describedSubject(key), call: "keyctl_link(\(key), \(keyring))")
    }

    /// Removes a key's link from a keyring; the key is destroyed when no link is left.
    ///
    /// C: `keyctl_unlink(key, keyring)`.
    ///
    /// - Parameters:
    ///   - key: the key.
    ///   - keyring: the keyring holding the link; needs write permission.
    /// - Throws: `KeyringError` with `notFound` if the key is not linked there.
    public func unlink(_ key: KeySerial, from keyring: KeySerial) throws(KeyringError) {
        _ = try check(
            system_keyctl_unlink(key.rawValue, keyring.rawValue), .debug, "keyctl_unlink",
            subject: describedSubject(key), call: "keyctl_unlink(\(key), \(keyring))")
    }

    /// Lists the serials of the keys linked directly into a keyring.
    ///
    /// C: `keyctl_read(keyring, buffer, buflen)` on a keyring, retried if it grew meanwhile.
    ///
    /// - Parameter keyring: the keyring; needs read permission.
    /// - Throws: `KeyringError` (`permissionDenied`, `notFound`, `invalidArgument` if not a keyring).
    public func children(of keyring: KeySerial) throws(KeyringError) -> [KeySerial] {
        let stride = MemoryLayout<Int32>.stride
        var capacity = 64
        while true {
            var serials: [KeySerial] = []
            let needed = try withUnsafeTemporaryAllocation(of: Int32.self, capacity: capacity) {
                (buffer) throws(KeyringError) -> Int in
                let bytes = try check(
                    system_keyctl_read(keyring.rawValue, buffer.baseAddress, buffer.count * stride),
                    .trace, "keyctl_read", subject: KeyringSubject(key: keyring, type: .keyring),
                    call: "keyctl_read(\(keyring), buffer, \(buffer.count * stride))")
                if bytes <= buffer.count * stride {
                    serials = buffer.prefix(bytes / stride).map(KeySerial.init(rawValue:))
                }
                return bytes
            }
            if needed <= capacity * stride { return serials }
            capacity = needed / stride + 16  // room for keys linked while we ask again
        }
    }
}
