import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif

/// The per-domain secret that stays on this machine, outside the domain's home.
///
/// 32 random bytes in `<device dir>/<domainID>.secret` (mode 0600 in a 0700
/// directory owned by the user). It is entangled into the passphrase's
/// key-encryption key, keys the keybag's MAC, and alone wraps the `none`
/// class key. Why: a copy of the home (a backup, a synced folder) without
/// this file cannot be attacked by guessing passphrases offline, and cannot
/// be altered undetected. Loading refuses a file or directory that group or
/// others can access, rather than silently use a secret that may have leaked.
struct DeviceSecret: ~Copyable {
    static let size = 32
    let key: SecretBytes

    private init(key: consuming SecretBytes) { self.key = key }

    /// Creates (or, for `recover`, replaces) the device secret of `id`.
    static func create(for id: DomainID, at location: DomainLocation, io: any FileIO) throws(ProtectionError) -> DeviceSecret {
        try PrivatePath.makeDirectory(location.deviceDirectory)
        try PrivatePath.checkPrivate(location.deviceDirectory, directory: true)
        let key = try crypto { () throws(CryptoError) in try SecretBytes.random(count: size) }
        try key.withUnsafeBytes { (b) throws(ProtectionError) in
            try DurableFile.write(b, to: location.deviceSecretPath(id), mode: 0o600, io: io)
        }
        return DeviceSecret(key: key)
    }

    /// Loads the device secret of `id`, checking ownership and modes first.
    /// - Throws: `.notFound` with the `dpctl recover` hint when it is missing (the
    ///   home was copied from another machine); `.insecurePermissions`; `.corruptKeybag`
    ///   when the file is not 32 bytes.
    static func load(for id: DomainID, at location: DomainLocation, io: any FileIO) throws(ProtectionError) -> DeviceSecret {
        let path = location.deviceSecretPath(id)
        do throws(ProtectionError) {
            try PrivatePath.checkPrivate(location.deviceDirectory, directory: true)
            try PrivatePath.checkPrivate(path, directory: false)
        } catch where error.code == .notFound {
            throw ProtectionError(.notFound, "the device secret '\(path)' of domain \(id) is missing: the domain was copied from another machine, or the secret was deleted; restore it with `dpctl recover` and the recovery key", path: path)
        }
        let fd: Int32
        do throws(SystemError) { fd = try io.open(path, flags: O_RDONLY, mode: 0) } catch { throw .errno(error.errno, "read", path) }
        defer { io.close(fd) }
        var key = try crypto { () throws(CryptoError) in try SecretBytes(zeroedCount: size) }
        let got: Int, total: Int64
        do throws(SystemError) {
            total = try io.size(fd)
            got = try key.withUnsafeMutableBytes { (b) throws(SystemError) in try io.readFully(fd, into: b, at: 0) }
        } catch { throw .errno(error.errno, "read", path) }
        guard got == size, total == Int64(size) else {
            throw ProtectionError(.corruptKeybag, "the device secret '\(path)' is \(total) bytes, not \(size): it was damaged; restore the domain with `dpctl recover` and the recovery key", path: path)
        }
        return DeviceSecret(key: key)
    }

    /// Shreds the device secret of `id` (see `DurableFile.shred`).
    static func destroy(for id: DomainID, at location: DomainLocation, io: any FileIO) throws(ProtectionError) {
        try DurableFile.shred(location.deviceSecretPath(id), io: io)
    }

    /// The key of the keybag's MAC.
    func macKey() throws(ProtectionError) -> SecretBytes {
        try crypto { () throws(CryptoError) in try KeyDerivation.subkey(of: key, context: "dpkbmac1", id: 1) }
    }

    /// The key that wraps the `none` class key (no passphrase involved).
    func classNoneKey() throws(ProtectionError) -> SecretBytes {
        try crypto { () throws(CryptoError) in try KeyDerivation.subkey(of: key, context: "dpclassd", id: 1) }
    }

    /// The key-encryption key: keyed BLAKE2b (key: this secret) over a label, the domain and the Argon2id output.
    ///
    /// Both halves are needed: the passphrase (through Argon2id) and this file.
    func entangle(_ stretched: borrowing SecretBytes, domain: DomainID) throws(ProtectionError) -> SecretBytes {
        try crypto { () throws(CryptoError) in
            var h = try StreamingHash(key: key)
            Array("dp-kek-v1".utf8).withUnsafeBytes { h.update($0) }
            domain.bytes.withUnsafeBytes { h.update($0) }
            stretched.withUnsafeBytes { h.update($0) }
            return try h.finalizeSecret()
        }
    }
}
