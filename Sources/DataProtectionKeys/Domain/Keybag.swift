import DataProtectionFormat
import SystemLayer
import ProtectionCrypto

/// A keybag read from disk and authenticated, with the operations that need its secrets.
///
/// Class keys (A, B, C) are wrapped by the passphrase KEK (Argon2id entangled
/// with the device secret); class `none`, and class B's public key, by the device secret alone; every
/// class key is also sealed to the recovery public key, and those seals are MACed with a key only the
/// recovery key yields. Changing the passphrase rewraps these 4–8 entries only, so it costs the same
/// whatever the number of files.
///
/// Test hook: testing SPI (with the members the keybag fuzzer drives: building, sealing and every unwrapping), so the
/// fuzz harness in Tests/Support can authenticate and unwrap mutated keybags; loading and saving stay package-level.
@_spi(Testing) public struct Keybag: Sendable {
    package var contents: KeybagContents

    /// A keybag holding `contents` (parsed and authenticated by the caller, or new).
    public init(contents: KeybagContents) { self.contents = contents }

    package var domainID: DomainID { contents.domainID }

    // MARK: Reading and writing

    /// Reads `location`'s keybag and verifies its MAC with the device secret `secret` picks for it.
    /// - Throws: `.notFound` (no domain there), `.corruptKeybag`, `.unsupportedVersion`, `.io`.
    package static func load(_ location: DomainLocation, io: any FileIO, verifyingWith secret: (KeybagContents) throws(ProtectionError) -> DeviceSecret) throws(ProtectionError) -> Keybag {
        let (contents, body, mac) = try parseFile(location, io: io)
        let device = try secret(contents)
        guard try isAuthentic(body, mac, device) else {
            throw ProtectionError(.corruptKeybag, "the keybag '\(location.keybagPath)' failed authentication: it was altered or damaged, or the device secret '\(location.deviceSecretPath(contents.domainID))' belongs to another copy of the domain; restore the keybag from a backup, or run `dpctl recover` with the recovery key", path: location.keybagPath)
        }
        return Keybag(contents: contents)
    }

    /// Whether `mac` is the device MAC of `body` under `device`.
    package static func isAuthentic(_ body: ArraySlice<UInt8>, _ mac: [UInt8], _ device: borrowing DeviceSecret) throws(ProtectionError) -> Bool {
        let expected = try Self.mac(Array(body), device)
        return expected.withUnsafeBytes { a in mac.withUnsafeBytes { GenericHash.equal(a, $0) } }
    }

    /// Reads and parses the keybag without the device secret (for `recover`, which authenticates with the recovery key).
    package static func parseFile(_ location: DomainLocation, io: any FileIO) throws(ProtectionError) -> (KeybagContents, ArraySlice<UInt8>, [UInt8]) {
        let path = location.keybagPath
        let bytes: [UInt8]
        do throws(ProtectionError) {
            bytes = try DurableFile.read(path, limit: KeybagContents.maxSize, io: io, tooLarge: KeybagContents.corrupt("it is larger than any keybag"))
        } catch where error.code == .notFound {
            throw ProtectionError(.notFound, "there is no protection domain at '\(location.home)' (no keybag); create one with `dpctl init`, or pass the right --home", path: path)
        }
        do throws(ProtectionError) { return try KeybagContents.parse(bytes) } catch {
            throw ProtectionError(error.code, "'\(path)': \(error.message)", path: path)
        }
    }

    /// Atomically and durably replaces the keybag file with these contents, written as the current version.
    ///
    /// - Parameters:
    ///   - device: the device secret that seals it (MAC, class B's public key, class `none`).
    ///   - kek: the passphrase KEK of these contents, which unwraps the recovery authentication key to re-MAC the recovery entries.
    package mutating func save(_ location: DomainLocation, _ device: borrowing DeviceSecret, kek: borrowing SecretBytes, io: any FileIO) throws(ProtectionError) {
        let bytes = try fileBytes(device, kek: kek)
        try DurableFile.write(bytes, to: location.keybagPath, mode: 0o600, io: io)
    }

    /// The whole file `save` writes: upgrades a v1 contents, names the device secret, re-MACs the recovery entries, adds the MAC and checksum.
    public mutating func fileBytes(_ device: borrowing DeviceSecret, kek: borrowing SecretBytes) throws(ProtectionError) -> [UInt8] {
        // A v1 keybag's class-B public keys were in the clear: wrap them under the device secret.
        for i in contents.entries.indices {
            guard let plain = contents.entries[i].publicKey else { continue }
            let e = contents.entries[i]
            contents.entries[i].wrappedPublicKey = try wrap(plain, try device.classBPublicKeyKey(), KeybagContents.publicKeyAD(domainID, e.protectionClass, e.generation))
            contents.entries[i].publicKey = nil
        }
        contents.version = contents.writtenVersion
        contents.deviceSecretID = try device.identifier()
        if let auth = contents.recoveryAuthentication {
            let key = try unwrapSecret(auth.wrappedKey, kek, KeybagContents.recoveryKeyAD(domainID))
            let mac = try Self.mac(contents.recoverySection(), key)
            contents.recoveryAuthentication = RecoveryAuthentication(wrappedKey: auth.wrappedKey, mac: mac)
        }
        var bytes = contents.body()
        bytes += try Self.mac(bytes, device)
        bytes += try KeybagContents.checksum(bytes[...])
        return bytes
    }

    /// The device MAC of `body` under `device`: what a keybag file holds after its body.
    public static func mac(_ body: [UInt8], _ device: borrowing DeviceSecret) throws(ProtectionError) -> [UInt8] {
        try mac(body, try device.macKey())
    }

    private static func mac(_ bytes: [UInt8], _ key: borrowing SecretBytes) throws(ProtectionError) -> [UInt8] {
        try bytes.span.bytes.withUnsafeBytes { (b) throws(ProtectionError) in try crypto { () throws(CryptoError) in try GenericHash.mac(key: key, b) } }
    }

    // MARK: Creating

    /// Writes a new keybag holding fresh generation-1 keys of all four classes, its recovery entries authenticated by
    /// `recovery`, its passphrase KEK bound as `binding` says.
    package static func create(
        id: DomainID, passphrase: borrowing SecretBytes, kdf: Argon2Parameters, device: borrowing DeviceSecret, recovery: borrowing RecoveryKey,
        binding: KeyBinding = .file, at location: DomainLocation, io: any FileIO
    ) throws(ProtectionError) -> Keybag {
        let salt = try crypto { () throws(CryptoError) in try SecureRandom.bytes(PasswordHash.saltSize) }
        let pair = try recovery.sealingKeyPair()
        var bag = Keybag(contents: KeybagContents(domainID: id, kdf: kdf, salt: salt, recoveryPublicKey: pair.publicKey.bytes, entries: []))
        let kek = try bag.newPassphraseKEK(passphrase, device, binding: binding, at: location)
        try bag.authenticateRecovery(with: recovery, kek: kek)
        for c in ProtectionClass.allCases { try bag.add(try ClassKey.generate(c, generation: 1), kek: kek, device: device) }
        try bag.save(location, device, kek: kek, io: io)
        return bag
    }

    // MARK: Keys

    /// Runs Argon2id on `passphrase` with the stored salt and parameters, passes the result through the keybag's
    /// binding (the TPM at `location.tpmTCTI` for a TPM-bound keybag) and entangles it with the device secret.
    /// - Throws: for a TPM-bound keybag, `.wrongPassphrase` (counted by the TPM), `.tpmLockout`, `.wrongTPM`, `.tpmUnavailable`.
    public func passphraseKEK(_ passphrase: borrowing SecretBytes, _ device: borrowing DeviceSecret, at location: DomainLocation) throws(ProtectionError) -> SecretBytes {
        let stretched = try stretch(passphrase)
        return try device.entangle(try bound(stretched, tcti: location.tpmTCTI, keybag: location.keybagPath), domain: domainID)
    }

    /// The passphrase KEK for contents whose salt was just drawn: binds them anew as `binding` says (a new TPM key
    /// for `.tpm2`), then derives the KEK as `passphraseKEK` does.
    package mutating func newPassphraseKEK(
        _ passphrase: borrowing SecretBytes, _ device: borrowing DeviceSecret, binding: KeyBinding, at location: DomainLocation
    ) throws(ProtectionError) -> SecretBytes {
        let stretched = try stretch(passphrase)
        try rebind(binding, stretched)
        let tcti = if case .tpm2(let t) = binding { t } else { location.tpmTCTI }
        return try device.entangle(try bound(stretched, tcti: tcti, keybag: location.keybagPath), domain: domainID)
    }

    /// Argon2id of `passphrase` with the stored salt and parameters.
    private func stretch(_ passphrase: borrowing SecretBytes) throws(ProtectionError) -> SecretBytes {
        try crypto { () throws(CryptoError) in try PasswordHash.deriveKey(passphrase: passphrase, salt: contents.salt, parameters: contents.kdf) }
    }

    /// Unwraps every generation of the passphrase classes (A, B, C) with `kek`.
    /// - Throws: `.wrongPassphrase` when the KEK does not open them (the MAC already proved the keybag intact).
    public func unwrapPassphraseClasses(_ kek: borrowing SecretBytes) throws(ProtectionError) -> [ClassKey] {
        var out: [ClassKey] = []
        for e in contents.entries where e.protectionClass != .none {
            do throws(ProtectionError) { out.append(try unwrap(e, with: kek)) } catch where error.code == .authenticationFailed {
                throw ProtectionError(.wrongPassphrase, "wrong passphrase for the domain at this home; try again, or use `dpctl recover` with the recovery key")
            }
        }
        return out
    }

    /// Unwraps generation `g` of class `none` with the device secret alone.
    public func unwrapNone(_ g: UInt32, _ device: borrowing DeviceSecret) throws(ProtectionError) -> ClassKey? {
        guard let e = contents.entry(.none, g) else { return nil }
        let k = try device.classNoneKey()
        do throws(ProtectionError) { return try unwrap(e, with: k) } catch where error.code == .authenticationFailed {
            throw KeybagContents.corrupt("the none class key does not authenticate under the device secret")
        }
    }

    /// The public key of generation `g` of a public-key class (B), unwrapped with the device secret (or, in a v1 keybag, read in the clear).
    public func publicKey(_ c: ProtectionClass, _ g: UInt32, _ device: borrowing DeviceSecret) throws(ProtectionError) -> X25519PublicKey? {
        guard let e = contents.entry(c, g) else { return nil }
        let bytes: [UInt8]
        if let plain = e.publicKey { bytes = plain } else if let w = e.wrappedPublicKey {
            do throws(ProtectionError) {
                let k = try unwrapSecret(w, try device.classBPublicKeyKey(), KeybagContents.publicKeyAD(domainID, c, g))
                bytes = k.withUnsafeBytes { Array($0) }
            } catch where error.code == .authenticationFailed {
                throw KeybagContents.corrupt("the public key of class \(c) generation \(g) does not authenticate under the device secret")
            }
        } else { return nil }
        return try crypto { () throws(CryptoError) in try X25519PublicKey(bytes: bytes) }
    }

    /// Opens every entry's recovery seal with the recovery key, after checking the recovery MAC.
    ///
    /// On this path nothing but the recovery key is trusted (no device secret, no passphrase): the MAC
    /// under a key derived from the recovery key alone proves that the entries are the ones the domain
    /// wrote, so nobody holding a copy of the keybag can plant a class key of their own.
    /// - Returns: the keys, and whether the entries were authenticated (false for a v1 recovery section).
    /// - Throws: `.wrongPassphrase` for a recovery key that does not open them; `.corruptKeybag` (no path; the caller adds it).
    public func unwrapWithRecovery(_ recovery: borrowing RecoveryKey) throws(ProtectionError) -> (keys: [ClassKey], authenticated: Bool) {
        let pair = try recovery.sealingKeyPair()
        guard pair.publicKey.bytes == contents.recoveryPublicKey else {
            throw ProtectionError(.wrongPassphrase, "this recovery key belongs to another domain (or another `dpctl init` of it); use the one shown when this domain was created")
        }
        if let auth = contents.recoveryAuthentication {
            let expected = try Self.mac(contents.recoverySection(), try recovery.authenticationKey())
            guard expected.withUnsafeBytes({ a in auth.mac.withUnsafeBytes { GenericHash.equal(a, $0) } }) else {
                throw ProtectionError(.corruptKeybag, "its recovery entries do not authenticate under this recovery key: entries were added, removed or altered since the domain wrote them (whoever holds a copy may have planted a class key); nothing was changed; recover from an unaltered copy of the keybag, such as a backup")
            }
        }
        var out: [ClassKey] = []
        for e in contents.entries {
            let ad = KeybagContents.entryAD(domainID, e.protectionClass, e.generation, recovery: true)
            let secret = try e.recoverySealed.span.bytes.withUnsafeBytes { (w) throws(ProtectionError) in
                try ad.span.bytes.withUnsafeBytes { (a) throws(ProtectionError) in
                    do throws(CryptoError) { return try KeySealing.open(w, with: pair, ad: a) } catch {
                        throw KeybagContents.corrupt("the recovery seal of class \(e.protectionClass) generation \(e.generation) does not authenticate")
                    }
                }
            }
            // Class B's public key is recomputed from its private key: the stored one is not covered by the recovery MAC.
            var pk: X25519PublicKey?
            if e.protectionClass.usesPublicKeySealing {
                pk = try crypto { () throws(CryptoError) in try X25519KeyPair(secretKey: try secret.duplicate()).publicKey }
                if let plain = e.publicKey, pk?.bytes != plain {
                    throw KeybagContents.corrupt("the public key of class \(e.protectionClass) generation \(e.generation) does not match its private key")
                }
            }
            out.append(ClassKey(e.protectionClass, generation: e.generation, secret: SharedSecret(secret), publicKey: pk))
        }
        return (out, contents.recoveryAuthentication != nil)
    }

    /// Derives the recovery authentication key from `recovery` and stores it wrapped under `kek`; `save` then MACs the recovery entries.
    public mutating func authenticateRecovery(with recovery: borrowing RecoveryKey, kek: borrowing SecretBytes) throws(ProtectionError) {
        let key = try recovery.authenticationKey()
        contents.recoveryAuthentication = RecoveryAuthentication(
            wrappedKey: try wrap(key, kek, KeybagContents.recoveryKeyAD(domainID)), mac: [UInt8](repeating: 0, count: KeybagContents.macSize))
    }

    /// Rewraps the recovery authentication key (if any) from the old passphrase KEK to the new one.
    package mutating func rewrapRecoveryAuthentication(from old: borrowing SecretBytes, to new: borrowing SecretBytes) throws(ProtectionError) {
        guard let auth = contents.recoveryAuthentication else { return }
        let ad = KeybagContents.recoveryKeyAD(domainID)
        let key = try unwrapSecret(auth.wrappedKey, old, ad)
        let wrapped = try wrap(key, new, ad)
        contents.recoveryAuthentication = RecoveryAuthentication(wrappedKey: wrapped, mac: auth.mac)
    }

    /// Adds (or replaces) `key`'s entry: wrapped by `kek` (or the device's class-D key for `none`) and sealed to the
    /// recovery key; class B's public key wrapped by the device secret.
    public mutating func add(_ key: ClassKey, kek: borrowing SecretBytes, device: borrowing DeviceSecret) throws(ProtectionError) {
        guard let s = key.secret else { throw ProtectionError.locked(key.protectionClass) }
        let c = key.protectionClass, g = key.generation
        let ad = KeybagContents.entryAD(domainID, c, g, recovery: false)
        let rad = KeybagContents.entryAD(domainID, c, g, recovery: true)
        let recoveryPK = try crypto { () throws(CryptoError) in try X25519PublicKey(bytes: contents.recoveryPublicKey) }
        let wrapped: [UInt8], sealed: [UInt8]
        if c == .none {
            wrapped = try wrap(s.secret, try device.classNoneKey(), ad)
        } else {
            wrapped = try wrap(s.secret, kek, ad)
        }
        sealed = try rad.span.bytes.withUnsafeBytes { (a) throws(ProtectionError) in
            try crypto { () throws(CryptoError) in try KeySealing.seal(s.secret, to: recoveryPK, ad: a) }
        }
        let wrappedPK = try key.publicKey.map { (pk) throws(ProtectionError) in try wrap(pk.bytes, try device.classBPublicKeyKey(), KeybagContents.publicKeyAD(domainID, c, g)) }
        contents.entries.removeAll { $0.protectionClass == c && $0.generation == g }
        contents.entries.append(KeybagEntry(protectionClass: c, generation: g, wrappedPublicKey: wrappedPK, wrapped: wrapped, recoverySealed: sealed))
        contents.entries.sort { ($0.protectionClass.rawValue, $0.generation) < ($1.protectionClass.rawValue, $1.generation) }
    }

    private func wrap(_ key: borrowing SecretBytes, _ kek: borrowing SecretBytes, _ ad: [UInt8]) throws(ProtectionError) -> [UInt8] {
        try ad.span.bytes.withUnsafeBytes { (a) throws(ProtectionError) in try crypto { () throws(CryptoError) in try KeyWrap.wrap(key, with: kek, ad: a) } }
    }

    /// Wraps public bytes (class B's public key): kept confidential, so a keybag copy cannot be used to seal files.
    private func wrap(_ bytes: [UInt8], _ kek: borrowing SecretBytes, _ ad: [UInt8]) throws(ProtectionError) -> [UInt8] {
        let s = try bytes.span.bytes.withUnsafeBytes { (b) throws(ProtectionError) in try crypto { () throws(CryptoError) in try SecretBytes(copying: b) } }
        return try wrap(s, kek, ad)
    }

    private func unwrapSecret(_ wrapped: [UInt8], _ kek: borrowing SecretBytes, _ ad: [UInt8]) throws(ProtectionError) -> SecretBytes {
        try wrapped.span.bytes.withUnsafeBytes { (w) throws(ProtectionError) in
            try ad.span.bytes.withUnsafeBytes { (a) throws(ProtectionError) in
                do throws(CryptoError) { return try KeyWrap.unwrap(w, with: kek, ad: a) } catch {
                    throw ProtectionError(error.code == .authenticationFailed ? .authenticationFailed : .io(EIO), error.message, underlying: error)
                }
            }
        }
    }

    private func unwrap(_ e: KeybagEntry, with kek: borrowing SecretBytes) throws(ProtectionError) -> ClassKey {
        let secret = try unwrapSecret(e.wrapped, kek, KeybagContents.entryAD(domainID, e.protectionClass, e.generation, recovery: false))
        // Class B's public key follows from its private key; the stored copy is only for creating while locked.
        let pk = try e.protectionClass.usesPublicKeySealing ? crypto { () throws(CryptoError) in try X25519KeyPair(secretKey: try secret.duplicate()).publicKey } : nil
        return ClassKey(e.protectionClass, generation: e.generation, secret: SharedSecret(secret), publicKey: pk)
    }
}

#if canImport(Glibc)
import Glibc
#endif
