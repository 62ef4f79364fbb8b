import ProtectionCrypto

/// A keybag read from disk and authenticated, with the operations that need its secrets.
///
/// Class keys (A, B, C) are wrapped by the passphrase KEK (Argon2id entangled
/// with the device secret); class `none` by the device secret alone; every
/// class key is also sealed to the recovery public key. Changing the
/// passphrase rewraps these 4–8 entries only, so it costs the same whatever
/// the number of files.
struct Keybag: Sendable {
    var contents: KeybagContents

    var domainID: DomainID { contents.domainID }

    // MARK: Reading and writing

    /// Reads `location`'s keybag and verifies its MAC with the device secret.
    /// - Throws: `.notFound` (no domain there), `.corruptKeybag`, `.unsupportedVersion`, `.io`.
    static func load(_ location: DomainLocation, io: any FileIO, verifyingWith secret: (DomainID) throws(ProtectionError) -> DeviceSecret) throws(ProtectionError) -> Keybag {
        let (contents, body, mac) = try parseFile(location, io: io)
        let device = try secret(contents.domainID)
        let expected = try Self.mac(Array(body), device)
        let ok = expected.withUnsafeBytes { a in mac.withUnsafeBytes { GenericHash.equal(a, $0) } }
        guard ok else {
            throw ProtectionError(.corruptKeybag, "the keybag '\(location.keybagPath)' failed authentication: it was altered or damaged, or the device secret '\(location.deviceSecretPath(contents.domainID))' belongs to another copy of the domain; restore the keybag from a backup, or run `dpctl recover` with the recovery key", path: location.keybagPath)
        }
        return Keybag(contents: contents)
    }

    /// Reads and parses the keybag without the device secret (for `recover`, whose sealed entries authenticate themselves).
    static func parseFile(_ location: DomainLocation, io: any FileIO) throws(ProtectionError) -> (KeybagContents, ArraySlice<UInt8>, [UInt8]) {
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

    /// Atomically and durably replaces the keybag file with these contents and a fresh MAC.
    func save(_ location: DomainLocation, _ device: borrowing DeviceSecret, io: any FileIO) throws(ProtectionError) {
        var bytes = contents.body()
        bytes += try Self.mac(bytes, device)
        bytes += try KeybagContents.checksum(bytes[...])
        try DurableFile.write(bytes, to: location.keybagPath, mode: 0o600, io: io)
    }

    static func mac(_ body: [UInt8], _ device: borrowing DeviceSecret) throws(ProtectionError) -> [UInt8] {
        let k = try device.macKey()
        return try body.span.bytes.withUnsafeBytes { (b) throws(ProtectionError) in try crypto { () throws(CryptoError) in try GenericHash.mac(key: k, b) } }
    }

    // MARK: Creating

    /// A new keybag holding fresh generation-1 keys of all four classes.
    static func create(
        id: DomainID, passphrase: borrowing SecretBytes, kdf: Argon2Parameters, device: borrowing DeviceSecret, recovery: borrowing RecoveryKey
    ) throws(ProtectionError) -> (Keybag, [ClassKey]) {
        let salt = try crypto { () throws(CryptoError) in try SecureRandom.bytes(PasswordHash.saltSize) }
        let pair = try recovery.sealingKeyPair()
        var bag = Keybag(contents: KeybagContents(domainID: id, kdf: kdf, salt: salt, recoveryPublicKey: pair.publicKey.bytes, entries: []))
        let kek = try bag.passphraseKEK(passphrase, device)
        var keys: [ClassKey] = []
        for c in ProtectionClass.allCases {
            let k = try ClassKey.generate(c, generation: 1)
            try bag.add(k, kek: kek, device: device)
            keys.append(k)
        }
        return (bag, keys)
    }

    // MARK: Keys

    /// Runs Argon2id on `passphrase` with the stored salt and parameters and entangles the result with the device secret.
    func passphraseKEK(_ passphrase: borrowing SecretBytes, _ device: borrowing DeviceSecret) throws(ProtectionError) -> SecretBytes {
        let stretched = try crypto { () throws(CryptoError) in
            try PasswordHash.deriveKey(passphrase: passphrase, salt: contents.salt, parameters: contents.kdf)
        }
        return try device.entangle(stretched, domain: domainID)
    }

    /// Unwraps every generation of the passphrase classes (A, B, C) with `kek`.
    /// - Throws: `.wrongPassphrase` when the KEK does not open them (the MAC already proved the keybag intact).
    func unwrapPassphraseClasses(_ kek: borrowing SecretBytes) throws(ProtectionError) -> [ClassKey] {
        var out: [ClassKey] = []
        for e in contents.entries where e.protectionClass != .none {
            do throws(ProtectionError) { out.append(try unwrap(e, with: kek)) } catch where error.code == .authenticationFailed {
                throw ProtectionError(.wrongPassphrase, "wrong passphrase for the domain at this home; try again, or use `dpctl recover` with the recovery key")
            }
        }
        return out
    }

    /// Unwraps generation `g` of class `none` with the device secret alone.
    func unwrapNone(_ g: UInt32, _ device: borrowing DeviceSecret) throws(ProtectionError) -> ClassKey? {
        guard let e = contents.entry(.none, g) else { return nil }
        let k = try device.classNoneKey()
        do throws(ProtectionError) { return try unwrap(e, with: k) } catch where error.code == .authenticationFailed {
            throw KeybagContents.corrupt("the none class key does not authenticate under the device secret")
        }
    }

    /// Opens every entry's recovery seal with the recovery key.
    /// - Throws: `.wrongPassphrase` for a recovery key that does not open them.
    func unwrapWithRecovery(_ recovery: borrowing RecoveryKey) throws(ProtectionError) -> [ClassKey] {
        let pair = try recovery.sealingKeyPair()
        guard pair.publicKey.bytes == contents.recoveryPublicKey else {
            throw ProtectionError(.wrongPassphrase, "this recovery key belongs to another domain (or another `dpctl init` of it); use the one shown when this domain was created")
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
            // On this path nothing but the seals is authenticated (no device secret, no MAC), so class B's
            // public key is recomputed from its private key: a substituted one would expose new files.
            var pk: X25519PublicKey?
            if e.protectionClass.usesPublicKeySealing {
                pk = try crypto { () throws(CryptoError) in try X25519KeyPair(secretKey: try secret.duplicate()).publicKey }
                guard pk?.bytes == e.publicKey else { throw KeybagContents.corrupt("the public key of class \(e.protectionClass) generation \(e.generation) does not match its private key") }
            }
            out.append(ClassKey(e.protectionClass, generation: e.generation, secret: SharedSecret(secret), publicKey: pk))
        }
        return out
    }

    /// Adds (or replaces) `key`'s entry: wrapped by `kek` (or the device's class-D key for `none`) and sealed to the recovery key.
    mutating func add(_ key: ClassKey, kek: borrowing SecretBytes, device: borrowing DeviceSecret) throws(ProtectionError) {
        guard let s = key.secret else { throw ProtectionError.locked(key.protectionClass) }
        let c = key.protectionClass, g = key.generation
        let ad = KeybagContents.entryAD(domainID, c, g, recovery: false)
        let rad = KeybagContents.entryAD(domainID, c, g, recovery: true)
        let recoveryPK = try crypto { () throws(CryptoError) in try X25519PublicKey(bytes: contents.recoveryPublicKey) }
        let wrapped: [UInt8], sealed: [UInt8]
        if c == .none {
            let dk = try device.classNoneKey()
            wrapped = try wrap(s.secret, dk, ad)
        } else {
            wrapped = try wrap(s.secret, kek, ad)
        }
        sealed = try rad.span.bytes.withUnsafeBytes { (a) throws(ProtectionError) in
            try crypto { () throws(CryptoError) in try KeySealing.seal(s.secret, to: recoveryPK, ad: a) }
        }
        contents.entries.removeAll { $0.protectionClass == c && $0.generation == g }
        contents.entries.append(KeybagEntry(protectionClass: c, generation: g, publicKey: key.publicKey?.bytes, wrapped: wrapped, recoverySealed: sealed))
        contents.entries.sort { ($0.protectionClass.rawValue, $0.generation) < ($1.protectionClass.rawValue, $1.generation) }
    }

    private func wrap(_ key: borrowing SecretBytes, _ kek: borrowing SecretBytes, _ ad: [UInt8]) throws(ProtectionError) -> [UInt8] {
        try ad.span.bytes.withUnsafeBytes { (a) throws(ProtectionError) in try crypto { () throws(CryptoError) in try KeyWrap.wrap(key, with: kek, ad: a) } }
    }

    private func unwrap(_ e: KeybagEntry, with kek: borrowing SecretBytes) throws(ProtectionError) -> ClassKey {
        let ad = KeybagContents.entryAD(domainID, e.protectionClass, e.generation, recovery: false)
        let secret = try e.wrapped.span.bytes.withUnsafeBytes { (w) throws(ProtectionError) in
            try ad.span.bytes.withUnsafeBytes { (a) throws(ProtectionError) in
                do throws(CryptoError) { return try KeyWrap.unwrap(w, with: kek, ad: a) } catch {
                    throw ProtectionError(error.code == .authenticationFailed ? .authenticationFailed : .io(EIO), error.message, underlying: error)
                }
            }
        }
        let pk = try e.publicKey.map { (b) throws(ProtectionError) in try crypto { () throws(CryptoError) in try X25519PublicKey(bytes: b) } }
        return ClassKey(e.protectionClass, generation: e.generation, secret: SharedSecret(secret), publicKey: pk)
    }
}

#if canImport(Glibc)
import Glibc
#endif
