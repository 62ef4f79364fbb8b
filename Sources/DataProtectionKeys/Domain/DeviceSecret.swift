import DataProtectionFormat
import SystemLayer
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif

/// The per-domain secret that stays on this machine, outside the domain's home.
///
/// 32 random bytes in `<device dir>/<domainID>.secret` (mode 0600 in a 0700
/// directory owned by the user). It is entangled into the passphrase's
/// key-encryption key, keys the keybag's MAC, and alone wraps the `none`
/// class key and class B's public key. Why: a copy of the home (a backup, a synced folder) without
/// this file cannot be attacked by guessing passphrases offline, and cannot
/// be altered undetected. Loading refuses a file or directory that group or
/// others can access, rather than silently use a secret that may have leaked.
///
/// Test hook: testing SPI (its size and `init(key:)`), so the keybag fuzzer in Tests/Support can fix one; creating,
/// loading and deriving stay package-level.
@_spi(Testing) public struct DeviceSecret: ~Copyable {
    /// Bytes in a device secret.
    public static let size = 32
    package let key: SecretBytes

    /// A device secret holding `key` (`create` and `load` make them; test hook: the fuzz harness fixes one).
    public init(key: consuming SecretBytes) { self.key = key }

    /// Creates (or, for `recover`, replaces) the device secret of `id`.
    package static func create(for id: DomainID, at location: DomainLocation, io: any FileIO) throws(ProtectionError) -> DeviceSecret {
        try PrivatePath.makeDirectory(location.deviceDirectory)
        try PrivatePath.checkPrivate(location.deviceDirectory, directory: true)
        let key = try crypto { () throws(CryptoError) in try SecretBytes.random(count: size) }
        try key.withUnsafeBytes { (b) throws(ProtectionError) in
            try DurableFile.write(b, to: location.deviceSecretPath(id), mode: 0o600, io: io)
        }
        return DeviceSecret(key: key)
    }

    /// Loads the device secret `contents` names (its identifier): the current one, or the next one of an
    /// unfinished device-secret rotation (`passwd` or `recover` interrupted after its keybag write).
    /// - Throws: `.corruptKeybag` naming the keybag when neither is the one that sealed it (a copy from before
    ///   a passphrase change or a recovery, or from another machine); else as `load(for:at:io:)`.
    package static func load(for contents: KeybagContents, at location: DomainLocation, io: any FileIO) throws(ProtectionError) -> DeviceSecret {
        let id = contents.domainID, current = location.deviceSecretPath(id)
        // A v1 keybag names no device secret: its MAC decides.
        if contents.version == 1 { return try load(location, id, path: current, io: io) }
        // The current secret; else the next one of an unfinished rotation; else the current one again (a rotation finished meanwhile).
        var first: ProtectionError?
        for (i, path) in [current, DeviceSecretRotation.nextPath(location, id), current].enumerated() {
            do throws(ProtectionError) {
                let secret = try load(location, id, path: path, io: io)
                if try secret.identifier() == contents.deviceSecretID { return secret }
            } catch { if i == 0 { first = error } }
        }
        if let first { throw first }
        throw ProtectionError(.corruptKeybag, "the keybag '\(location.keybagPath)' was sealed under a device secret this machine no longer has: it is a copy from before a passphrase change or a recovery (which make old copies useless on purpose), or from another machine; use the current keybag, or run `dpctl recover` with the recovery key", path: location.keybagPath)
    }

    /// Loads the current device secret of `id`, checking ownership and modes first.
    /// - Throws: `.notFound` with the `dpctl recover` hint when it is missing (the
    ///   home was copied from another machine); `.insecurePermissions`; `.corruptKeybag`
    ///   when the file is not 32 bytes.
    package static func load(for id: DomainID, at location: DomainLocation, io: any FileIO) throws(ProtectionError) -> DeviceSecret {
        try load(location, id, path: location.deviceSecretPath(id), io: io)
    }

    /// Loads the device secret file at `path` (the current or the next one of `id`).
    package static func load(_ location: DomainLocation, _ id: DomainID, path: String, io: any FileIO) throws(ProtectionError) -> DeviceSecret {
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

    /// Shreds the device secret of `id`, and the next one of an unfinished rotation (see `DurableFile.shred`).
    package static func destroy(for id: DomainID, at location: DomainLocation, io: any FileIO) throws(ProtectionError) {
        try DurableFile.shred(DeviceSecretRotation.nextPath(location, id), io: io)
        try DurableFile.shred(location.deviceSecretPath(id), io: io)
    }

    /// The public identifier the keybag stores to name the device secret that sealed it (a 16-byte KDF output: reveals nothing of the secret).
    package func identifier() throws(ProtectionError) -> [UInt8] {
        let id = try crypto { () throws(CryptoError) in try KeyDerivation.subkey(of: key, context: "dpdevid1", id: 1, length: KeybagContents.deviceSecretIDSize) }
        return id.withUnsafeBytes { Array($0) }
    }

    /// The key that wraps class B's public key in the keybag (so a copy of the keybag alone cannot seal class-B files).
    package func classBPublicKeyKey() throws(ProtectionError) -> SecretBytes {
        try crypto { () throws(CryptoError) in try KeyDerivation.subkey(of: key, context: "dpclassb", id: 1) }
    }

    /// The key of the keybag's MAC.
    package func macKey() throws(ProtectionError) -> SecretBytes {
        try crypto { () throws(CryptoError) in try KeyDerivation.subkey(of: key, context: "dpkbmac1", id: 1) }
    }

    /// The key that wraps the `none` class key (no passphrase involved).
    package func classNoneKey() throws(ProtectionError) -> SecretBytes {
        try crypto { () throws(CryptoError) in try KeyDerivation.subkey(of: key, context: "dpclassd", id: 1) }
    }

    /// The key-encryption key: keyed BLAKE2b (key: this secret) over a label, the domain and the Argon2id output.
    ///
    /// Both halves are needed: the passphrase (through Argon2id) and this file.
    package func entangle(_ stretched: borrowing SecretBytes, domain: DomainID) throws(ProtectionError) -> SecretBytes {
        try crypto { () throws(CryptoError) in
            var h = try StreamingHash(key: key)
            Array("dp-kek-v1".utf8).withUnsafeBytes { h.update($0) }
            domain.bytes.withUnsafeBytes { h.update($0) }
            stretched.withUnsafeBytes { h.update($0) }
            return try h.finalizeSecret()
        }
    }
}
