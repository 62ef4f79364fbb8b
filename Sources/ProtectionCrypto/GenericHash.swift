internal import CSodium

/// BLAKE2b (`crypto_generichash`): plain hashing and keyed MACs.
public enum GenericHash {
    /// Length of the MACs and digests the project uses.
    public static let length = 32

    /// Keyed BLAKE2b-256 of the concatenation of `parts` (a MAC when `key` is secret).
    public static func mac(key: borrowing SecretBytes, _ parts: UnsafeRawBufferPointer...) throws(CryptoError) -> [UInt8] {
        var h = try StreamingHash(key: key)
        for p in parts { h.update(p) }
        return h.finalize()
    }

    /// Unkeyed BLAKE2b-256 of the concatenation of `parts`.
    public static func hash(_ parts: UnsafeRawBufferPointer...) throws(CryptoError) -> [UInt8] {
        var h = try StreamingHash()
        for p in parts { h.update(p) }
        return h.finalize()
    }

    /// Compares two public MACs in constant time.
    public static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        a.count == b.count && (a.count == 0 || sodium_memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0)
    }
}

/// Incremental BLAKE2b-256, keyed or not, for streams (e.g. hashing a file in chunks).
///
/// The state lives in locked memory because a keyed state holds the key.
public struct StreamingHash: ~Copyable {
    private var state: SecretBytes

    /// Starts an unkeyed hash.
    public init() throws(CryptoError) {
        state = try SecretBytes(zeroedCount: crypto_generichash_statebytes() + 64)
        withState { _ = crypto_generichash_init($0, nil, 0, GenericHash.length) }
    }

    /// Starts a keyed hash (a MAC) with `key` (16…64 bytes).
    public init(key: borrowing SecretBytes) throws(CryptoError) {
        guard (Int(crypto_generichash_KEYBYTES_MIN)...Int(crypto_generichash_KEYBYTES_MAX)).contains(key.count) else {
            throw CryptoError(.invalidLength, "a BLAKE2b key must be 16…64 bytes, got \(key.count)")
        }
        state = try SecretBytes(zeroedCount: crypto_generichash_statebytes() + 64)
        key.withUnsafeBytes { k in
            withState { _ = crypto_generichash_init($0, k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count, GenericHash.length) }
        }
    }

    /// Adds `bytes` to the hash.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let p = bytes.baseAddress, bytes.count > 0 else { return }
        withState { _ = crypto_generichash_update($0, p.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count)) }
    }

    /// The 32-byte digest; consumes the hasher.
    public consuming func finalize() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: GenericHash.length)
        out.withUnsafeMutableBufferPointer { o in withState { _ = crypto_generichash_final($0, o.baseAddress!, GenericHash.length) } }
        return out
    }

    /// The 32-byte digest in locked memory, for digests that are keys; consumes the hasher.
    public consuming func finalizeSecret() throws(CryptoError) -> SecretBytes {
        var out = try SecretBytes(zeroedCount: GenericHash.length)
        out.withUnsafeMutableBytes { o in
            withState { _ = crypto_generichash_final($0, o.baseAddress!.assumingMemoryBound(to: UInt8.self), GenericHash.length) }
        }
        return out
    }

    // The state must be 64-byte aligned; sodium_malloc aligns the end of the
    // block, so align inside the (over-allocated) buffer.
    private mutating func withState<R>(_ body: (OpaquePointer) -> R) -> R {
        state.withUnsafeMutableBytes { b in
            let addr = UInt(bitPattern: b.baseAddress!)
            let aligned = (addr + 63) & ~UInt(63)
            return body(OpaquePointer(UnsafeMutableRawPointer(bitPattern: aligned)!))
        }
    }
}
