import ProtectionCrypto

/// The identifier of a protection domain: 16 random bytes, written as 32 hex digits.
///
/// It names the domain's keys in the kernel keyring and its device-secret
/// file, and it is bound into every wrapped class key of the keybag.
public struct DomainID: Hashable, Sendable, CustomStringConvertible {
    /// Bytes in an identifier.
    public static let size = 16
    /// The identifier's 16 bytes.
    public let bytes: [UInt8]

    /// Wraps 16 bytes.
    /// - Throws: `.corruptKeybag` for any other length.
    public init(bytes: [UInt8]) throws(ProtectionError) {
        guard bytes.count == Self.size else { throw ProtectionError(.corruptKeybag, "a domain identifier must be \(Self.size) bytes, got \(bytes.count)") }
        self.bytes = bytes
    }

    /// A fresh random identifier.
    package static func random() throws(ProtectionError) -> DomainID {
        try DomainID(bytes: try crypto { () throws(CryptoError) in try SecureRandom.bytes(size) })
    }

    /// 32 lowercase hex digits.
    public var description: String { bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }
}
