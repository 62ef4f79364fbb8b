internal import CSodium

/// Secret bytes in locked, guarded memory that is zeroed when its owner ends.
///
/// Small secrets (up to 1 KiB) take a slot of `SecurePool`, whose arenas come
/// from `sodium_malloc` (locked, guard pages around each arena) and whose slots
/// are zeroed on release; larger ones get their own `sodium_malloc` block
/// (guard pages, `mlock`, canary), released with `sodium_free`, which zeroes it. The type is
/// non-copyable, so a secret has exactly one owner and cannot be duplicated
/// by accident; the bytes are reachable only inside `withUnsafeBytes`.
/// `description` never prints the bytes.
public struct SecretBytes: ~Copyable, @unchecked Sendable {
    // @unchecked Sendable: the pointer is uniquely owned (the type is
    // ~Copyable), so moving the owner to another task moves the only access.
    @usableFromInline let base: UnsafeMutableRawPointer
    /// Number of secret bytes.
    public let count: Int
    /// The `SecurePool` slot class, or -1 for a block of its own.
    private let slot: Int8

    /// Allocates `count` zeroed bytes of locked memory.
    /// - Throws: `CryptoError.outOfMemory` when `sodium_malloc` fails.
    public init(zeroedCount count: Int) throws(CryptoError) {
        try Sodium.ensureReady()
        guard count >= 0 else { throw CryptoError(.invalidLength, "secret length must not be negative") }
        if let c = SecurePool.slotClass(for: Swift.max(count, 1)), let p = SecurePool.allocate(c) {
            self.base = p  // pool slots are zero when handed out
            self.count = count
            self.slot = Int8(c)
            return
        }
        // sodium_malloc(0) is legal but we keep one byte so `base` is always valid.
        guard let p = sodium_malloc(Swift.max(count, 1)) else {
            throw CryptoError(.outOfMemory, "cannot allocate \(count) bytes of locked memory for a secret")
        }
        sodium_memzero(p, Swift.max(count, 1))
        self.base = p
        self.count = count
        self.slot = -1
    }

    /// Allocates `count` bytes from libsodium's CSPRNG.
    public static func random(count: Int) throws(CryptoError) -> SecretBytes {
        var s = try SecretBytes(zeroedCount: count)
        s.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
        return s
    }

    /// Copies `bytes` into new locked memory; the caller remains responsible for wiping its source.
    public init(copying bytes: UnsafeRawBufferPointer) throws(CryptoError) {
        self = try SecretBytes(zeroedCount: bytes.count)
        if let src = bytes.baseAddress, bytes.count > 0 { base.copyMemory(from: src, byteCount: bytes.count) }
    }

    /// Moves the UTF-8 bytes of `string` into locked memory (for passphrases typed by a person).
    ///
    /// Swift strings cannot be wiped; callers that can should read secrets straight
    /// into `SecretBytes` instead. Used only where a `String` already exists.
    public init(utf8 string: String) throws(CryptoError) {
        let utf8 = string.utf8
        self = try SecretBytes(zeroedCount: utf8.count)
        withUnsafeMutableBytes { $0.copyBytes(from: utf8) }
    }

    /// Calls `body` with read access to the secret; the pointer must not escape.
    @inlinable @inline(__always)
    public borrowing func withUnsafeBytes<R: ~Copyable, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Calls `body` with write access to the secret; the pointer must not escape.
    @inline(__always)
    public mutating func withUnsafeMutableBytes<R: ~Copyable, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeMutableRawBufferPointer(start: base, count: count))
    }

    /// Compares two secrets in constant time (`sodium_memcmp`); lengths are not secret.
    public borrowing func constantTimeEquals(_ other: borrowing SecretBytes) -> Bool {
        guard count == other.count else { return false }
        return other.withUnsafeBytes { o in sodium_memcmp(base, o.baseAddress, count) == 0 }
    }

    /// Compares the secret with public bytes in constant time.
    public borrowing func constantTimeEquals(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard count == bytes.count else { return false }
        return sodium_memcmp(base, bytes.baseAddress, count) == 0
    }

    /// A new secret holding the same bytes (an explicit, visible copy).
    public borrowing func duplicate() throws(CryptoError) -> SecretBytes {
        try withUnsafeBytes { (b) throws(CryptoError) in try SecretBytes(copying: b) }
    }

    /// Redacted description: length only.
    public var description: String { "SecretBytes(\(count) bytes, <redacted>)" }

    deinit {
        if slot >= 0 { SecurePool.release(base, Int(slot)) } else { sodium_free(base) }  // both zero first
    }
}
