import DataProtectionFormat
import ProtectionCrypto

/// The recovery key: 256 random bits shown once at `init`, which unlock the keybag without the passphrase or the device secret.
///
/// Written as 56 Crockford base32 characters in 14 dash-separated groups of
/// four (`7K3Q-…`): 32 key bytes and 3 check bytes (a BLAKE2b prefix), so a
/// mistyped character is reported as a typo, not as a wrong key. Parsing
/// ignores case, dashes and spaces, and reads `O` as `0` and `I`/`L` as `1`.
/// The text and the key live only in `SecretBytes`.
public struct RecoveryKey: ~Copyable, Sendable {
    static let keySize = 32
    static let checkSize = 3
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)
    /// Characters in the grouped text form.
    public static let textLength = 56 + 13

    let key: SecretBytes

    /// Test hook: a recovery key holding `key` (`random` and parsing make them; the fuzz harness fixes one).
    @_spi(Testing) public init(key: consuming SecretBytes) { self.key = key }

    /// A fresh random recovery key.
    package static func random() throws(ProtectionError) -> RecoveryKey {
        RecoveryKey(key: try crypto { () throws(CryptoError) in try SecretBytes.random(count: keySize) })
    }

    /// Parses the grouped text a person typed or a script passed (in locked memory).
    /// - Throws: `.wrongPassphrase` when it has the wrong length, a character outside
    ///   the alphabet, or a check mismatch (a typo).
    public init(text: borrowing SecretBytes) throws(ProtectionError) {
        var raw = try crypto { () throws(CryptoError) in try SecretBytes(zeroedCount: Self.keySize + Self.checkSize) }
        let ok: Bool = raw.withUnsafeMutableBytes { out in
            text.withUnsafeBytes { t in
                var acc: UInt32 = 0, bits = 0, n = 0, chars = 0
                for ch in t {
                    if ch == UInt8(ascii: "-") || ch == UInt8(ascii: " ") || ch == 10 || ch == 13 || ch == 9 { continue }
                    guard let v = Self.value(of: ch) else { return false }
                    chars += 1
                    acc = (acc << 5) | UInt32(v); bits += 5
                    if bits >= 8 {
                        bits -= 8
                        guard n < out.count else { return false }
                        out[n] = UInt8(truncatingIfNeeded: acc >> UInt32(bits)); n += 1
                    }
                    acc &= (1 << UInt32(bits)) - 1
                }
                acc = 0
                return chars == 56 && n == out.count
            }
        }
        guard ok else {
            throw ProtectionError(.wrongPassphrase, "that is not a recovery key: it must be 56 characters from 0-9 and A-Z (without I, L, O, U), in groups of four; check for a missing or extra group")
        }
        let key = try raw.withUnsafeBytes { (r) throws(ProtectionError) in
            try crypto { () throws(CryptoError) in try SecretBytes(copying: UnsafeRawBufferPointer(rebasing: r[0..<Self.keySize])) }
        }
        let check = try Self.check(key)
        let matches = raw.withUnsafeBytes { r in Array(r[Self.keySize...]) == check }
        guard matches else {
            throw ProtectionError(.wrongPassphrase, "the recovery key has a typo (its check characters do not match); compare it group by group with the one shown at `dpctl init`")
        }
        self.key = key
    }

    /// Calls `body` with the grouped text (69 ASCII bytes, locked memory, wiped afterwards); print it once, never log it.
    public borrowing func withText<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        var raw = try SecretBytes(zeroedCount: Self.keySize + Self.checkSize)
        let check = try Self.check(key)
        raw.withUnsafeMutableBytes { r in
            key.withUnsafeBytes { k in r.baseAddress!.copyMemory(from: k.baseAddress!, byteCount: Self.keySize) }
            for i in 0..<Self.checkSize { r[Self.keySize + i] = check[i] }
        }
        var text = try SecretBytes(zeroedCount: Self.textLength)
        text.withUnsafeMutableBytes { out in
            raw.withUnsafeBytes { r in
                var acc: UInt32 = 0, bits = 0, chars = 0, o = 0
                for byte in r {
                    acc = (acc << 8) | UInt32(byte); bits += 8
                    while bits >= 5 {
                        bits -= 5
                        if chars > 0 && chars % 4 == 0 { out[o] = UInt8(ascii: "-"); o += 1 }
                        out[o] = Self.alphabet[Int((acc >> UInt32(bits)) & 31)]; o += 1; chars += 1
                    }
                    acc &= (1 << UInt32(bits)) - 1
                }
            }
        }
        return try text.withUnsafeBytes { try body($0) }
    }

    /// The X25519 key pair the keybag seals class keys to; only its public half is stored. Test hook (testing SPI):
    /// the keybag fuzzer seals its seeds to it.
    @_spi(Testing) public func sealingKeyPair() throws(ProtectionError) -> X25519KeyPair {
        try crypto { () throws(CryptoError) in
            try X25519KeyPair(secretKey: try KeyDerivation.subkey(of: key, context: "dprecov1", id: 1))
        }
    }

    /// The key of the keybag's recovery MAC: only the recovery key yields it, so a keybag copy cannot be given entries `recover` accepts.
    func authenticationKey() throws(ProtectionError) -> SecretBytes {
        try crypto { () throws(CryptoError) in try KeyDerivation.subkey(of: key, context: "dprecmac", id: 1) }
    }

    private static func check(_ key: borrowing SecretBytes) throws(ProtectionError) -> [UInt8] {
        let digest = try key.withUnsafeBytes { (k) throws(ProtectionError) in
            try Array("dp-recovery-check".utf8).span.bytes.withUnsafeBytes { (label) throws(ProtectionError) in
                try crypto { () throws(CryptoError) in try GenericHash.hash(label, k) }
            }
        }
        return Array(digest[0..<checkSize])
    }

    private static func value(of ch: UInt8) -> UInt8? {
        var c = ch
        if c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z") { c -= 32 }
        switch c {
        case UInt8(ascii: "O"): return 0
        case UInt8(ascii: "I"), UInt8(ascii: "L"): return 1
        default: return alphabet.firstIndex(of: c).map(UInt8.init)
        }
    }
}
