// The backend file: the only place KernelKeyring touches libkeyutils.
//
// Each `system_<name>` function is a direct pass-through to the libkeyutils
// call of that name: it returns what the C function returns (-1 with `errno`
// set on failure) and translates nothing. Translation into `KeyringError`
// happens one level up, in `Keyring+Call.swift`.
internal import CKeyutils

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

/// The calling thread's `errno`.
@inline(__always)
internal var system_errno: Int32 { errno }

/// `add_key(2)`.
@inline(__always)
internal func system_add_key(
    _ type: UnsafePointer<CChar>, _ description: UnsafePointer<CChar>,
    _ payload: UnsafeRawPointer?, _ length: Int, _ keyring: Int32
) -> Int32 {
    add_key(type, description, payload, length, keyring)
}

/// `keyctl_get_keyring_ID(3)`.
@inline(__always)
internal func system_keyctl_get_keyring_ID(_ id: Int32, _ create: Bool) -> Int32 {
    keyctl_get_keyring_ID(id, create ? 1 : 0)
}

/// `keyctl_join_session_keyring(3)`; `nil` joins a new anonymous session keyring.
@inline(__always)
internal func system_keyctl_join_session_keyring(_ name: UnsafePointer<CChar>?) -> Int32 {
    keyctl_join_session_keyring(name)
}

/// `keyctl_get_persistent(3)`; `uid` of `UInt32.max` (i.e. -1) means the caller's.
@inline(__always)
internal func system_keyctl_get_persistent(_ uid: UInt32, _ linkInto: Int32) -> Int {
    keyctl_get_persistent(uid, linkInto)
}

/// `keyctl_search(3)`.
@inline(__always)
internal func system_keyctl_search(
    _ keyring: Int32, _ type: UnsafePointer<CChar>, _ description: UnsafePointer<CChar>,
    _ destination: Int32
) -> Int {
    keyctl_search(keyring, type, description, destination)
}

/// `keyctl_read(3)`: returns the payload's full length, which may exceed `length`.
@inline(__always)
internal func system_keyctl_read(
    _ id: Int32, _ buffer: UnsafeMutableRawPointer?, _ length: Int
) -> Int {
    keyctl_read(id, buffer?.assumingMemoryBound(to: CChar.self), length)
}

/// `keyctl_describe(3)`: returns the full length including the NUL.
@inline(__always)
internal func system_keyctl_describe(
    _ id: Int32, _ buffer: UnsafeMutablePointer<CChar>?, _ length: Int
) -> Int {
    keyctl_describe(id, buffer, length)
}

/// `keyctl_setperm(3)`.
@inline(__always)
internal func system_keyctl_setperm(_ id: Int32, _ permissions: UInt32) -> Int {
    keyctl_setperm(id, permissions)
}

/// `keyctl_set_timeout(3)`.
@inline(__always)
internal func system_keyctl_set_timeout(_ id: Int32, _ seconds: UInt32) -> Int {
    keyctl_set_timeout(id, seconds)
}

/// `keyctl_update(3)`.
@inline(__always)
internal func system_keyctl_update(_ id: Int32, _ payload: UnsafeRawPointer?, _ length: Int) -> Int {
    keyctl_update(id, payload, length)
}

/// `keyctl_invalidate(3)`.
@inline(__always)
internal func system_keyctl_invalidate(_ id: Int32) -> Int { keyctl_invalidate(id) }

/// `keyctl_revoke(3)`.
@inline(__always)
internal func system_keyctl_revoke(_ id: Int32) -> Int { keyctl_revoke(id) }

/// `keyctl_link(3)`.
@inline(__always)
internal func system_keyctl_link(_ id: Int32, _ keyring: Int32) -> Int {
    keyctl_link(id, keyring)
}

/// `keyctl_unlink(3)`.
@inline(__always)
internal func system_keyctl_unlink(_ id: Int32, _ keyring: Int32) -> Int {
    keyctl_unlink(id, keyring)
}

/// `keyctl_capabilities(3)` with no buffer: a keyctl call that touches no key.
@inline(__always)
internal func system_keyctl_capabilities_probe() -> Int {
    keyctl_capabilities(nil, 0)
}
