internal import CSodium

/// BLAKE2b-based subkey derivation (`crypto_kdf_derive_from_key`).
///
/// One master key yields independent subkeys, told apart by an 8-character
/// context and a 64-bit identifier; knowing a subkey reveals nothing about the
/// master key or its other subkeys.
public enum KeyDerivation {
    /// Derives a `length`-byte subkey (16…64) of `key` (32 bytes) for `context` and `id`.
    /// - Parameter context: exactly 8 ASCII bytes naming the purpose, e.g. `"dpchunk1"`.
    /// - Throws: `.invalidLength` for a bad key, length or context.
    public static func subkey(
        of key: borrowing SecretBytes, context: StaticString, id: UInt64, length: Int = 32
    ) throws(CryptoError) -> SecretBytes {
        guard key.count == Int(crypto_kdf_KEYBYTES) else {
            throw CryptoError(.invalidLength, "a KDF master key must be \(crypto_kdf_KEYBYTES) bytes, got \(key.count)")
        }
        guard context.utf8CodeUnitCount == Int(crypto_kdf_CONTEXTBYTES) else {
            throw CryptoError(.invalidLength, "a KDF context must be \(crypto_kdf_CONTEXTBYTES) bytes")
        }
        guard (Int(crypto_kdf_BYTES_MIN)...Int(crypto_kdf_BYTES_MAX)).contains(length) else {
            throw CryptoError(.invalidLength, "a derived key must be \(crypto_kdf_BYTES_MIN)…\(crypto_kdf_BYTES_MAX) bytes, got \(length)")
        }
        var out = try SecretBytes(zeroedCount: length)
        out.withUnsafeMutableBytes { o in
            key.withUnsafeBytes { k in
                context.withUTF8Buffer { c in
                    c.withMemoryRebound(to: CChar.self) { ctx in
                        _ = crypto_kdf_derive_from_key(
                            o.baseAddress!.assumingMemoryBound(to: UInt8.self), length, id, ctx.baseAddress!,
                            k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                    }
                }
            }
        }
        return out
    }
}
