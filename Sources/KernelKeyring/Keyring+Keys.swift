// Adding, finding and reading keys: the hot path of an unlocked domain.
import Logging

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

extension Keyring {
    /// Adds a key (or updates the payload of a same-named key of that type) in `keyring` and sets its permissions.
    ///
    /// C: `add_key(type, description, payload, plen, keyring)`, then
    /// `keyctl_setperm(key, permissions)`. The key exists with the kernel's
    /// default mask (possessor all, owner view) between the two calls, which
    /// is never wider than any mask a caller should pass.
    ///
    /// - Parameters:
    ///   - type: the key type; `.user` for readable secrets, `.logon` for write-only ones.
    ///   - description: the key's name; must be unique per domain, since `@u` is
    ///     shared by every process of the uid.
    ///   - payload: the secret; the kernel copies it, this module does not.
    ///   - keyring: where the key is linked (its lifetime follows that keyring's).
    ///   - permissions: the mask to set; choose it on purpose (see `KeyPermissions.privateToOwner`).
    /// - Returns: the key's serial.
    /// - Throws: `KeyringError` (`invalidArgument` for a bad type, name or payload size,
    ///   `quotaExceeded`, `permissionDenied` on the keyring, `unavailable`).
    @discardableResult
    public func add(
        _ type: KeyType, description: String, payload: UnsafeRawBufferPointer,
        to keyring: KeySerial, permissions: KeyPermissions
    ) throws(KeyringError) -> KeySerial {
        let subject = KeyringSubject(type: type, description: description)
        let serial = try withCName(type.rawValue, "add_key", subject: subject) {
            (cType) throws(KeyringError) in
            try withCName(description, "add_key", subject: subject) {
                (cDescription) throws(KeyringError) in
                let result = system_add_key(
                    cType, cDescription, payload.baseAddress, payload.count, keyring.rawValue)
                return try check(
                    Int(result), .debug, "add_key", syscall: .addKey, subject: subject,
                    call: "add_key(\(quoted(type.rawValue)), \(quoted(description)), <data>, \(payload.count), \(keyring))"
                )
            }
        }
        let key = KeySerial(rawValue: Int32(truncatingIfNeeded: serial))
        try setPermissions(permissions, of: key, describedAs: description, type: type)
        return key
    }

    /// Replaces a key's payload in place: same serial, and every later read sees the new payload whole.
    ///
    /// C: `keyctl_update(key, payload, plen)`. The kernel swaps the payload
    /// under RCU, so a reader gets the old payload or the new one, never a mix,
    /// and none after this returns gets the old one. A `user` key's timeout is
    /// cleared by an update (`user_update` resets its expiry): set it again.
    ///
    /// - Parameters:
    ///   - key: the key; needs write permission.
    ///   - payload: the new payload; the kernel copies it, this module does not.
    /// - Throws: `KeyringError` (`permissionDenied`, `notFound`, `expired`, `revoked`, `quotaExceeded` when the
    ///   payload grows past the uid's byte quota, `invalidArgument`).
    public func update(_ key: KeySerial, payload: UnsafeRawBufferPointer) throws(KeyringError) {
        _ = try check(
            system_keyctl_update(key.rawValue, payload.baseAddress, payload.count), .debug, "keyctl_update",
            subject: describedSubject(key), call: "keyctl_update(\(key), <data>, \(payload.count))")
    }

    /// Finds a key by type and description in `keyring` and the keyrings below it that the caller may search.
    ///
    /// C: `keyctl_search(keyring, type, description, linkInto ?? 0)`.
    ///
    /// - Parameters:
    ///   - keyring: the root of the search.
    ///   - type: the key's type.
    ///   - description: the key's exact description.
    ///   - linkInto: a keyring to link the found key into, if any.
    /// - Returns: the key's serial.
    /// - Throws: `KeyringError` with `notFound` if no searchable key matches,
    ///   `expired` or `revoked` if the only match is.
    public func search(
        _ keyring: KeySerial, type: KeyType, description: String, linkInto: KeySerial? = nil
    ) throws(KeyringError) -> KeySerial {
        let subject = KeyringSubject(type: type, description: description)
        let destination = linkInto?.rawValue ?? 0
        let found = try withCName(type.rawValue, "keyctl_search", subject: subject) {
            (cType) throws(KeyringError) in
            try withCName(description, "keyctl_search", subject: subject) {
                (cDescription) throws(KeyringError) in
                try check(
                    system_keyctl_search(keyring.rawValue, cType, cDescription, destination),
                    .trace, "keyctl_search", subject: subject,
                    call: "keyctl_search(\(keyring), \(quoted(type.rawValue)), \(quoted(description)), \(destination))"
                )
            }
        }
        return KeySerial(rawValue: Int32(truncatingIfNeeded: found))
    }

    /// Reads a key's payload into the caller's buffer in one call and returns its length.
    ///
    /// C: `keyctl_read(key, buffer, buflen)`. Nothing is allocated. If the
    /// payload does not fit, the buffer is zeroed (older kernels copy a
    /// truncated payload) and the error carries the length needed.
    ///
    /// - Parameters:
    ///   - key: the key to read; needs read permission.
    ///   - buffer: where the payload goes, e.g. the caller's locked memory.
    /// - Returns: the payload's length, at most `buffer.count`.
    /// - Throws: `KeyringError` with `bufferTooSmall(required:)` when it does not
    ///   fit, `io(EOPNOTSUPP)` for a `logon` key, `notFound`, `expired`,
    ///   `revoked`, `permissionDenied`.
    public func read(_ key: KeySerial, into buffer: UnsafeMutableRawBufferPointer) throws(KeyringError) -> Int {
        let length = try check(
            system_keyctl_read(key.rawValue, buffer.baseAddress, buffer.count),
            .trace, "keyctl_read", subject: describedSubject(key),
            call: "keyctl_read(\(key), <data>, \(buffer.count))")
        guard length <= buffer.count else {
            buffer.initializeMemory(as: UInt8.self, repeating: 0)
            let subject = describedSubject(key)
            return try throwBufferTooSmall(required: length, subject: subject)
        }
        return length
    }

    /// Returns the length of a key's payload without reading it.
    ///
    /// C: `keyctl_read(key, NULL, 0)`.
    ///
    /// - Parameter key: the key; needs read permission.
    /// - Throws: `KeyringError` as for `read(_:into:)`.
    public func payloadLength(of key: KeySerial) throws(KeyringError) -> Int {
        try check(
            system_keyctl_read(key.rawValue, nil, 0), .trace, "keyctl_read",
            subject: describedSubject(key), call: "keyctl_read(\(key), NULL, 0)")
    }

    /// Reads a payload of unknown length: asks its length, lets the caller supply a buffer that big, and reads.
    ///
    /// C: `keyctl_read(key, NULL, 0)` then `keyctl_read(key, buffer, length)`,
    /// repeated (up to four times) if the payload grew in between. `provide`
    /// may be called more than once; each earlier buffer it returned has been
    /// zeroed by then and may be released.
    ///
    /// - Parameters:
    ///   - key: the key to read.
    ///   - provide: returns a buffer of at least the given length, which must
    ///     stay valid until this call returns (e.g. fresh `sodium_malloc` memory).
    /// - Returns: the payload's length.
    /// - Throws: what `provide` throws, or `KeyringError` as for
    ///   `read(_:into:)`, or `io(EAGAIN)` if the payload kept changing length.
    public func read(
        _ key: KeySerial, sizingBufferWith provide: (_ length: Int) throws -> UnsafeMutableRawBufferPointer
    ) throws -> Int {
        for _ in 0..<4 {
            let length = try payloadLength(of: key)
            let buffer = try provide(length)
            do {
                return try read(key, into: buffer)
            } catch {
                if case .bufferTooSmall = error.code { continue }
                throw error
            }
        }
        let subject = describedSubject(key)
        throw KeyringError(
            code: .io(EAGAIN), errno: EAGAIN, operation: "keyctl_read", key: key,
            keyDescription: subject.description,
            message: "keyctl_read on \(subject.phrase): the payload changed length on every attempt; "
                + "retry once whoever is updating the key has finished")
    }

    private func throwBufferTooSmall(required: Int, subject: KeyringSubject) throws(KeyringError) -> Int {
        let code = KeyringError.Code.bufferTooSmall(required: required)
        throw KeyringError(
            code: code, errno: 0, operation: "keyctl_read", key: subject.key,
            keyDescription: subject.description,
            message: KeyringError.message(code: code, errno: 0, operation: "keyctl_read", subject: subject))
    }
}
