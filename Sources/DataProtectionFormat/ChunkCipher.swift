import ProtectionCrypto

/// The chunk construction a protected file's header names at offset 10 (FORMAT.md §2, §3.1).
///
/// Users choose an algorithm (`AEADCipher`); the format decides how its nonces
/// are used. New files (format version 2) use XChaCha20-Poly1305, or AES-256-GCM
/// with extended nonces (a subkey per 12-byte key nonce), so no file written
/// today has a nonce budget that a writer can reach (FORMAT.md §7).
/// AES-256-GCM with 96-bit nonces under the file's content key is read, and
/// appended to, only in the version-1 files that already use it.
public enum ChunkCipher: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// XChaCha20-Poly1305, 24-byte random nonces: versions 1 and 2.
    case xchacha20poly1305 = 1
    /// AES-256-GCM, 12-byte random nonces under the content key: version 1 only (2^32 seals per file key).
    case aes256gcm = 2
    /// AES-256-GCM, 24-byte extended nonces (`AEADNonceMode.extended`): version 2.
    case aes256gcmExtended = 3

    /// The construction new files get for `algorithm`.
    public static func forNewFiles(_ algorithm: AEADCipher) -> ChunkCipher {
        algorithm == .aes256gcm ? .aes256gcmExtended : .xchacha20poly1305
    }

    /// The algorithm, as `ProtectedFileInfo` and handles report it.
    public var algorithm: AEADCipher { self == .xchacha20poly1305 ? .xchacha20poly1305 : .aes256gcm }

    /// How the chunk nonces are used with the algorithm: directly, or extended (a subkey per key nonce).
    public var nonceMode: AEADNonceMode { self == .aes256gcmExtended ? .extended : .direct }

    /// Nonce bytes at the start of every chunk.
    public var nonceSize: Int { self == .aes256gcmExtended ? AEADNonceMode.extendedNonceSize : algorithm.nonceSize }

    /// Bytes each chunk adds to its plaintext: nonce and tag (40, 28 or 40).
    public var overhead: Int { nonceSize + AEADCipher.tagSize }

    /// Whether a header of format `version` may name this construction.
    public func isAllowed(inVersion version: UInt8) -> Bool {
        switch self {
        case .xchacha20poly1305: return true
        case .aes256gcm: return version == 1
        case .aes256gcmExtended: return version >= 2
        }
    }

    /// The construction's name, as messages and `ProtectedFileInfo` show it.
    public var description: String { self == .aes256gcmExtended ? "AES-256-GCM (extended nonces)" : algorithm.description }
}
