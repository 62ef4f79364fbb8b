import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif

/// The fixed-size header of a protected file, format versions 1 and 2 (see FORMAT.md §3).
///
/// Encoding and parsing here are pure: no I/O and no keys. Authentication of
/// the header happens in `FileKeys` (the key wrap binds the fixed fields; the
/// header MAC binds every byte).
public struct FileHeader: Equatable, Sendable {
    /// The protected-file magic, bytes 0..<8.
    public static let magic: [UInt8] = [0x89, 0x44, 0x50, 0x46, 0x0D, 0x0A, 0x1A, 0x0A]  // "\x89DPF\r\n\x1a\n"
    /// The version new files get: 2, whose ciphers have no reachable nonce budget (FORMAT.md §7, §9).
    public static let currentVersion: UInt8 = 2
    /// Versions this implementation reads (and writes in place: a file keeps its version).
    public static let readableVersions: ClosedRange<UInt8> = 1...2
    /// Bytes 0..<40: the fixed fields, also the associated data of the key wrap.
    public static let fixedSize = 40
    /// Room for the wrapped per-file key: the largest wrapping (class B's sealing).
    public static let wrappedKeySlot = KeySealing.overhead + 32  // 104
    /// Bytes of the header MAC (keyed BLAKE2b-256).
    public static let macSize = 32
    /// Total header size, for every class and version.
    public static let size = fixedSize + wrappedKeySlot + macSize  // 176
    /// The smallest chunk size, as a power of two (4 KiB).
    public static let minChunkShift: UInt8 = 12
    /// The largest chunk size, as a power of two (16 MiB).
    public static let maxChunkShift: UInt8 = 24
    /// Feature flags this implementation understands (none in versions 1 and 2).
    public static let knownFlags: UInt32 = 0

    /// The format version (byte 8).
    public var version: UInt8
    /// The class whose key wraps the per-file key (byte 9).
    public var protectionClass: ProtectionClass
    /// The chunk construction (byte 10).
    public var cipher: ChunkCipher
    /// The chunk size as a power of two (byte 11).
    public var chunkShift: UInt8
    /// Feature flags (bytes 12..<16); none are defined.
    public var flags: UInt32
    /// The generation of the class key that wrapped the per-file key (bytes 20..<24).
    public var classKeyGeneration: UInt32
    /// The file's 16 random identifier bytes (bytes 24..<40).
    public var fileID: [UInt8]
    /// The wrapped per-file key: `KeyWrap` (classes A, C, D) or `KeySealing` (class B) output.
    public var wrappedKey: [UInt8]
    /// The header MAC over bytes 0..<144 (zero until the writer computes it).
    public var mac: [UInt8]

    /// Plaintext bytes in a full chunk.
    public var chunkSize: Int { 1 << Int(chunkShift) }

    /// A header from its fields (nothing is checked: `parse` validates, `FileKeys` authenticates).
    public init(
        version: UInt8 = FileHeader.currentVersion, protectionClass: ProtectionClass, cipher: ChunkCipher, chunkShift: UInt8, flags: UInt32 = 0,
        classKeyGeneration: UInt32, fileID: [UInt8], wrappedKey: [UInt8], mac: [UInt8] = [UInt8](repeating: 0, count: FileHeader.macSize)
    ) {
        self.version = version
        self.protectionClass = protectionClass
        self.cipher = cipher
        self.chunkShift = chunkShift
        self.flags = flags
        self.classKeyGeneration = classKeyGeneration
        self.fileID = fileID
        self.wrappedKey = wrappedKey
        self.mac = mac
    }

    /// The expected wrapped-key length for a class.
    public static func wrappedKeyLength(for c: ProtectionClass) -> Int {
        c.usesPublicKeySealing ? KeySealing.overhead + 32 : KeyWrap.overhead + 32
    }

    /// Bytes 0..<40: magic, version, class, cipher, chunk shift, flags, header size,
    /// wrapped-key length, class-key generation, file identifier.
    public func fixedBytes() -> [UInt8] { encoding(Self.fixedSize) }

    /// Bytes 0..<144: what the header MAC covers (fixed fields and the zero-padded key slot).
    public func authenticatedBytes() -> [UInt8] { encoding(Self.fixedSize + Self.wrappedKeySlot) }

    /// The full 176-byte encoding.
    public func encoded() -> [UInt8] { encoding(Self.size) }

    /// The first `count` bytes of the encoding (40, 144 or 176), in one allocation (every open and create encodes).
    private func encoding(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { b, initialized in
            let p = UnsafeMutableRawBufferPointer(b)
            p.initializeMemory(as: UInt8.self, repeating: 0)
            func put(_ bytes: [UInt8], at offset: Int) {
                bytes.withUnsafeBytes { p.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: Swift.min($0.count, count - offset)) }
            }
            put(Self.magic, at: 0)
            p[8] = version; p[9] = protectionClass.rawValue; p[10] = cipher.rawValue; p[11] = chunkShift
            p.storeBytes(of: flags.bigEndian, toByteOffset: 12, as: UInt32.self)
            p.storeBytes(of: UInt16(Self.size).bigEndian, toByteOffset: 16, as: UInt16.self)
            p.storeBytes(of: UInt16(wrappedKey.count).bigEndian, toByteOffset: 18, as: UInt16.self)
            p.storeBytes(of: classKeyGeneration.bigEndian, toByteOffset: 20, as: UInt32.self)
            put(fileID, at: 24)
            if count > Self.fixedSize { put(wrappedKey, at: Self.fixedSize) }  // then zero padding to 144
            if count > Self.fixedSize + Self.wrappedKeySlot { put(mac, at: Self.fixedSize + Self.wrappedKeySlot) }
            initialized = count
        }
    }

    /// Parses and validates the structure of `bytes` (at least `FileHeader.size` bytes).
    ///
    /// Checks everything that can be checked without a key; the caller must
    /// still verify the key wrap and the MAC.
    /// - Throws: `.notProtected` (magic), `.unsupportedVersion`, `.unsupportedFeature`,
    ///   `.corruptHeader` (any field out of range); messages name no file (the caller adds it).
    public static func parse(_ bytes: [UInt8]) throws(ProtectionError) -> FileHeader {
        guard bytes.count >= 8, bytes.withUnsafeBytes({ b in magic.withUnsafeBytes { memcmp(b.baseAddress!, $0.baseAddress!, 8) == 0 } }) else {
            throw ProtectionError(.notProtected, "it is not a protected file (no protected-file magic); protect it with `dpctl protect`")
        }
        guard bytes.count >= fixedSize else { throw ProtectionError(.corruptHeader, "the header is truncated (\(bytes.count) of \(size) bytes); restore the file from a backup") }
        let version = bytes[8]
        guard readableVersions.contains(version) else {
            throw ProtectionError(
                .unsupportedVersion,
                "the file uses format version \(version); this library reads versions \(readableVersions.lowerBound)…\(readableVersions.upperBound); upgrade swift-data-protection")
        }
        guard bytes.count >= size else { throw ProtectionError(.corruptHeader, "the header is truncated (\(bytes.count) of \(size) bytes); restore the file from a backup") }
        let flags = bytes.readBE(UInt32.self, at: 12)
        guard flags & ~knownFlags == 0 else {
            throw ProtectionError(.unsupportedFeature, "the file uses feature flags 0x\(String(flags, radix: 16)) unknown to this version; upgrade swift-data-protection")
        }
        guard let cls = ProtectionClass(rawValue: bytes[9]) else { throw corrupt("unknown protection class \(bytes[9])") }
        guard let cipher = ChunkCipher(rawValue: bytes[10]) else { throw corrupt("unknown cipher \(bytes[10])") }
        guard cipher.isAllowed(inVersion: version) else { throw corrupt("cipher \(cipher.rawValue) is not defined in format version \(version)") }
        let shift = bytes[11]
        guard (minChunkShift...maxChunkShift).contains(shift) else { throw corrupt("chunk size 2^\(shift) out of range") }
        guard bytes.readBE(UInt16.self, at: 16) == UInt16(size) else { throw corrupt("header size field is not \(size)") }
        let wlen = Int(bytes.readBE(UInt16.self, at: 18))
        guard wlen == wrappedKeyLength(for: cls) else { throw corrupt("wrapped key length \(wlen) does not match class \(cls)") }
        let slotEnd = fixedSize + wrappedKeySlot
        guard bytes[(fixedSize + wlen)..<slotEnd].allSatisfy({ $0 == 0 }) else { throw corrupt("key slot padding is not zero") }
        return FileHeader(
            version: version, protectionClass: cls, cipher: cipher, chunkShift: shift, flags: flags,
            classKeyGeneration: bytes.readBE(UInt32.self, at: 20),
            fileID: Array(bytes[24..<40]), wrappedKey: Array(bytes[fixedSize..<(fixedSize + wlen)]),
            mac: Array(bytes[slotEnd..<size]))
    }

    private static func corrupt(_ what: String) -> ProtectionError {
        ProtectionError(.corruptHeader, "the header is corrupt (\(what)); restore the file from a backup")
    }
}

extension Array where Element == UInt8 {
    /// Appends `v` in big-endian byte order.
    package mutating func appendBE<T: FixedWidthInteger>(_ v: T) {
        Swift.withUnsafeBytes(of: v.bigEndian) { append(contentsOf: $0) }
    }

    /// The big-endian integer at `offset`.
    package func readBE<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        var v: T = 0
        for i in 0..<MemoryLayout<T>.size { v = v << 8 | T(self[offset + i]) }
        return v
    }
}
