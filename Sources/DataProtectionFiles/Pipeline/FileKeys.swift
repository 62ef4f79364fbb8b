import DataProtectionKeys
import DataProtectionFormat
import ProtectionCrypto

/// The keys one open protected file uses, derived from its per-file key (FORMAT.md §3.3).
///
/// `content` seals chunks (with extended nonces it is the master of a subkey per key nonce, numbers the
/// seals of this set of keys under one key nonce, and keeps the last subkey expanded); `mac` authenticates
/// the header. A handle's keys are one writer session (FORMAT.md §6.1): a new set after every unlock. The per-file key
/// itself is not kept: it is unwrapped again when it must be rewrapped.
/// Dropping the last reference zeroes everything (the storage is `SecretBytes`).
final class FileKeys: Sendable {
    let content: AEADKey
    let mac: SecretBytes

    static let contentContext: StaticString = "dpfchunk"
    static let headerContext: StaticString = "dpfheadr"

    /// - Parameter sealsPerKeyNonce: with extended nonces, seals under one key nonce (2^32; smaller only in tests).
    init(fileKey: borrowing SecretBytes, cipher: ChunkCipher, sealsPerKeyNonce: UInt64 = AEADNonceMode.maxSealsPerKeyNonce) throws(CryptoError) {
        let ck = try KeyDerivation.subkey(of: fileKey, context: Self.contentContext, id: 1)
        content = try AEADKey(cipher.algorithm, key: ck, nonceMode: cipher.nonceMode, sealsPerKeyNonce: sealsPerKeyNonce)
        mac = try KeyDerivation.subkey(of: fileKey, context: Self.headerContext, id: 1)
    }

    /// The header MAC of `header` (computed over its encoding).
    func headerMAC(_ header: FileHeader) throws(CryptoError) -> [UInt8] {
        try header.encoded().span.bytes.withUnsafeBytes { (b) throws(CryptoError) in try headerMAC(of: b) }
    }

    /// The header MAC of a 176-byte header as it lies on disk: keyed BLAKE2b over bytes 0..<144
    /// (fixed fields, wrapped key, padding), FORMAT.md §3.4.
    func headerMAC(of header: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] {
        try GenericHash.mac(key: mac, UnsafeRawBufferPointer(rebasing: header[0..<(FileHeader.fixedSize + FileHeader.wrappedKeySlot)]))
    }
}
