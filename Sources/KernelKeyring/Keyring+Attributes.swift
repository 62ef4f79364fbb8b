// A key's attributes and its end of life: describe, permissions, timeout, invalidate, revoke.
import Logging

extension Keyring {
    /// Returns a key's type, owner, permissions and description, never its payload.
    ///
    /// C: `keyctl_describe(key, buffer, buflen)`.
    ///
    /// - Parameter key: the key; needs view permission.
    /// - Throws: `KeyringError` (`notFound`, `permissionDenied`, …).
    public func describe(_ key: KeySerial) throws(KeyringError) -> KeyAttributes {
        var capacity = 256
        while true {
            let outcome = try withUnsafeTemporaryAllocation(of: CChar.self, capacity: capacity) {
                (buffer) throws(KeyringError) -> (needed: Int, attributes: KeyAttributes?) in
                let needed = try check(
                    system_keyctl_describe(key.rawValue, buffer.baseAddress, buffer.count),
                    .trace, "keyctl_describe", subject: .serial(key),
                    call: "keyctl_describe(\(key), buffer, \(buffer.count))")
                guard needed <= buffer.count, needed > 0 else { return (needed, nil) }
                let bytes = UnsafeRawBufferPointer(start: buffer.baseAddress, count: needed - 1)
                let text = String(decoding: bytes, as: UTF8.self)
                return (needed, KeyAttributes(parsing: Substring(text)))
            }
            if outcome.needed > capacity {
                capacity = outcome.needed  // the description grew or is long: ask again
                continue
            }
            guard let attributes = outcome.attributes else {
                throw KeyringError(
                    code: .io(0), errno: 0, operation: "keyctl_describe", key: key,
                    keyDescription: nil,
                    message: "keyctl_describe on key \(key): the kernel's answer is not in the "
                        + "type;uid;gid;perm;description form; report this kernel as unsupported")
            }
            return attributes
        }
    }

    /// Sets a key's permission mask.
    ///
    /// C: `keyctl_setperm(key, permissions)`.
    ///
    /// - Parameters:
    ///   - permissions: the new mask, e.g. `KeyPermissions.privateToOwner`.
    ///   - key: the key; needs setattr permission.
    /// - Throws: `KeyringError` (`permissionDenied`, `notFound`, `invalidArgument`).
    public func setPermissions(_ permissions: KeyPermissions, of key: KeySerial) throws(KeyringError) {
        try setPermissions(permissions, of: key, describedAs: nil, type: nil)
    }

    func setPermissions(
        _ permissions: KeyPermissions, of key: KeySerial, describedAs description: String?,
        type: KeyType?
    ) throws(KeyringError) {
        _ = try check(
            system_keyctl_setperm(key.rawValue, permissions.rawValue), .debug, "keyctl_setperm",
            subject: description.map { KeyringSubject(key: key, type: type, description: $0) }
                ?? describedSubject(key),
            call: "keyctl_setperm(\(key), 0x\(permissions))")
    }

    /// Makes a key expire `seconds` from now, or never if `seconds` is 0.
    ///
    /// C: `keyctl_set_timeout(key, seconds)`. An expired key fails reads with
    /// `expired` and is then garbage-collected by the kernel (after
    /// `/proc/sys/kernel/keys/gc_delay`), which is what auto-lock relies on.
    ///
    /// - Parameters:
    ///   - key: the key; needs setattr permission.
    ///   - seconds: the timeout from now; 0 clears it.
    /// - Throws: `KeyringError` (`permissionDenied`, `notFound`, `expired`, `revoked`).
    public func setTimeout(_ key: KeySerial, seconds: UInt32) throws(KeyringError) {
        _ = try check(
            system_keyctl_set_timeout(key.rawValue, seconds), .debug, "keyctl_set_timeout",
            subject: describedSubject(key), call: "keyctl_set_timeout(\(key), \(seconds))")
    }

    /// Invalidates a key at once: it becomes unfindable and the kernel unlinks it from every keyring.
    ///
    /// C: `keyctl_invalidate(key)`. This is how `lock` removes class keys.
    /// Later uses fail with `revoked` until the kernel's garbage collector has
    /// run (microseconds to milliseconds), and with `notFound` after that.
    ///
    /// - Parameter key: the key; needs search permission.
    /// - Throws: `KeyringError` (`notFound`, `permissionDenied`).
    public func invalidate(_ key: KeySerial) throws(KeyringError) {
        _ = try check(
            system_keyctl_invalidate(key.rawValue), .debug, "keyctl_invalidate",
            subject: describedSubject(key), call: "keyctl_invalidate(\(key))")
    }

    /// Revokes a key: it stays linked but every later use fails with `revoked`.
    ///
    /// C: `keyctl_revoke(key)`.
    ///
    /// - Parameter key: the key; needs write or setattr permission.
    /// - Throws: `KeyringError` (`notFound`, `permissionDenied`, `revoked`).
    public func revoke(_ key: KeySerial) throws(KeyringError) {
        _ = try check(
            system_keyctl_revoke(key.rawValue), .debug, "keyctl_revoke",
            subject: describedSubject(key), call: "keyctl_revoke(\(key))")
    }

    /// The key's description for an error message, if the caller may still view it.
    func describedSubject(_ key: KeySerial) -> KeyringSubject {
        guard !key.isSpecial, let attributes = try? Keyring().describe(key) else {
            return .serial(key)
        }
        return KeyringSubject(key: key, type: attributes.type, description: attributes.description)
    }
}
