internal import CSodium

/// Public random bytes from libsodium's CSPRNG (nonces, salts, identifiers).
public enum SecureRandom {
    /// Fills `buffer` with random bytes.
    /// - Throws: `CryptoError.libraryUnavailable` if libsodium could not initialise
    ///   (never returns predictable bytes instead).
    @inline(__always)
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) {
        try Sodium.ensureReady()
        guard let p = buffer.baseAddress, buffer.count > 0 else { return }
        randombytes_buf(p, buffer.count)
    }

    /// Returns `count` random bytes.
    public static func bytes(_ count: Int) throws(CryptoError) -> [UInt8] {
        try Sodium.ensureReady()
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { if let p = $0.baseAddress { randombytes_buf(p, $0.count) } }
        return out
    }
}
