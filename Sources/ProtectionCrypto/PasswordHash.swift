internal import CSodium

/// Argon2id parameters, stored next to the salt so a key can be derived again.
public struct Argon2Parameters: Sendable, Equatable, Codable {
    /// Passes over memory (`opslimit`).
    public var opsLimit: UInt64
    /// Memory in bytes (`memlimit`).
    public var memLimit: UInt64

    public init(opsLimit: UInt64, memLimit: UInt64) {
        self.opsLimit = opsLimit
        self.memLimit = memLimit
    }

    /// libsodium's interactive preset (≈ 0.09 s, 64 MiB here).
    public static var interactive: Argon2Parameters {
        .init(opsLimit: UInt64(crypto_pwhash_OPSLIMIT_INTERACTIVE), memLimit: UInt64(crypto_pwhash_MEMLIMIT_INTERACTIVE))
    }
    /// libsodium's moderate preset (≈ 0.6 s, 256 MiB here).
    public static var moderate: Argon2Parameters {
        .init(opsLimit: UInt64(crypto_pwhash_OPSLIMIT_MODERATE), memLimit: UInt64(crypto_pwhash_MEMLIMIT_MODERATE))
    }
    /// libsodium's sensitive preset (≈ 3.7 s, 1 GiB here).
    public static var sensitive: Argon2Parameters {
        .init(opsLimit: UInt64(crypto_pwhash_OPSLIMIT_SENSITIVE), memLimit: UInt64(crypto_pwhash_MEMLIMIT_SENSITIVE))
    }
    /// The smallest parameters libsodium accepts; for tests only.
    public static var minimumForTests: Argon2Parameters {
        .init(opsLimit: UInt64(crypto_pwhash_opslimit_min()), memLimit: UInt64(crypto_pwhash_memlimit_min()))
    }

    /// Whether libsodium accepts these limits.
    public var isValid: Bool {
        opsLimit >= UInt64(crypto_pwhash_opslimit_min()) && opsLimit <= UInt64(crypto_pwhash_opslimit_max())
            && memLimit >= UInt64(crypto_pwhash_memlimit_min()) && memLimit <= UInt64(crypto_pwhash_memlimit_max())
    }
}

/// Argon2id password hashing (`crypto_pwhash`, algorithm ARGON2ID13).
public enum PasswordHash {
    /// Salt length in bytes.
    public static let saltSize = Int(crypto_pwhash_SALTBYTES)

    /// Derives a 32-byte key from `passphrase` and `salt`.
    /// - Throws: `.invalidLength` for a bad salt or parameters; `.outOfMemory` when
    ///   Argon2id cannot get `parameters.memLimit` bytes.
    public static func deriveKey(
        passphrase: borrowing SecretBytes, salt: [UInt8], parameters: Argon2Parameters, length: Int = 32
    ) throws(CryptoError) -> SecretBytes {
        try Sodium.ensureReady()
        guard salt.count == saltSize else { throw CryptoError(.invalidLength, "an Argon2id salt must be \(saltSize) bytes, got \(salt.count)") }
        guard parameters.isValid else {
            throw CryptoError(.invalidLength, "Argon2id parameters out of range (ops \(parameters.opsLimit), memory \(parameters.memLimit) bytes)")
        }
        var out = try SecretBytes(zeroedCount: length)
        let rc: Int32 = out.withUnsafeMutableBytes { o in
            passphrase.withUnsafeBytes { p in
                salt.withUnsafeBufferPointer { s in
                    crypto_pwhash(
                        o.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(length),
                        p.baseAddress!.assumingMemoryBound(to: CChar.self), UInt64(p.count),
                        s.baseAddress!, parameters.opsLimit, Int(parameters.memLimit), crypto_pwhash_ALG_ARGON2ID13)
                }
            }
        }
        guard rc == 0 else { throw CryptoError(.outOfMemory, "Argon2id could not allocate \(parameters.memLimit / 1_048_576) MiB") }
        return out
    }
}
