import ProtectionCrypto

/// One generation of one class key as the keybag stores it: wrapped twice, never in plaintext.
struct KeybagEntry: Equatable, Sendable {
    var protectionClass: ProtectionClass
    var generation: UInt32
    /// The X25519 public key (class `completeUnlessOpen` only), readable while locked so files can be created.
    var publicKey: [UInt8]?
    /// `KeyWrap` under the passphrase KEK (classes A–C) or the device secret's class-D key (class `none`).
    var wrapped: [UInt8]
    /// `KeySealing` to the recovery public key, so the recovery key alone restores it.
    var recoverySealed: [UInt8]
}

/// The keybag file, format v1: pure encoding and parsing, no keys and no I/O.
///
/// Layout (integers big-endian):
/// ```
///  0  magic "\x89DPK\r\n\x1a\n" (8)   8 version = 1 (1)   9 flags = 0 (1)   10 entry count (u16)
/// 12  domain identifier (16)
/// 28  Argon2id ops (u64)   36 Argon2id memory bytes (u64)   44 salt (16)
/// 60  recovery X25519 public key (32)
/// 92  entries: class (1) ‖ generation (u32) ‖ public key (32, zero unless class B)
///              ‖ wrapped (KeyWrap, 72) ‖ recovery-sealed (KeySealing, 104)      = 213 bytes each
///  …  MAC (32): keyed BLAKE2b-256 (key: the device secret's MAC subkey) of every byte before it
///  …  checksum (32): unkeyed BLAKE2b-256 of every byte before it
/// ```
/// The checksum catches accidental damage before any key is needed (a flipped
/// domain identifier would otherwise look like a missing device secret); the
/// MAC catches deliberate changes.
/// Every field is validated; a wrong length, an unknown value, a missing
/// class, a duplicated generation or trailing bytes make the whole keybag
/// `.corruptKeybag`, never half-read.
struct KeybagContents: Equatable, Sendable {
    static let magic: [UInt8] = [0x89, 0x44, 0x50, 0x4B, 0x0D, 0x0A, 0x1A, 0x0A]
    static let version: UInt8 = 1
    static let headerSize = 92
    static let wrappedSize = 32 + KeyWrap.overhead
    static let sealedSize = 32 + KeySealing.overhead
    static let entrySize = 1 + 4 + 32 + wrappedSize + sealedSize
    static let macSize = 32
    static let checksumSize = 32
    static let maxEntries = 64
    static let maxSize = headerSize + maxEntries * entrySize + macSize + checksumSize

    var domainID: DomainID
    var kdf: Argon2Parameters
    var salt: [UInt8]
    var recoveryPublicKey: [UInt8]
    var entries: [KeybagEntry]

    /// The highest generation of `c`: what new files are wrapped with.
    func current(_ c: ProtectionClass) -> KeybagEntry? {
        entries.filter { $0.protectionClass == c }.max { $0.generation < $1.generation }
    }

    /// The entry for generation `g` of `c`, if the keybag holds it.
    func entry(_ c: ProtectionClass, _ g: UInt32) -> KeybagEntry? {
        entries.first { $0.protectionClass == c && $0.generation == g }
    }

    /// Associated data of an entry's wrapping: binds it to this format, domain, class, generation and purpose.
    static func entryAD(_ id: DomainID, _ c: ProtectionClass, _ g: UInt32, recovery: Bool) -> [UInt8] {
        var b = Array("dp-keybag-v1".utf8) + id.bytes + [c.rawValue]
        b.appendBE(g)
        b.append(recovery ? 2 : 1)
        return b
    }

    /// Every byte the MAC covers.
    func body() -> [UInt8] {
        var b = Self.magic + [Self.version, 0]
        b.appendBE(UInt16(entries.count))
        b += domainID.bytes
        b.appendBE(kdf.opsLimit)
        b.appendBE(kdf.memLimit)
        b += salt
        b += recoveryPublicKey
        for e in entries {
            b.append(e.protectionClass.rawValue)
            b.appendBE(e.generation)
            b += e.publicKey ?? [UInt8](repeating: 0, count: 32)
            b += e.wrapped
            b += e.recoverySealed
        }
        return b
    }

    /// Parses a whole keybag file into its contents, the bytes its MAC covers, and the MAC.
    /// - Throws: `.corruptKeybag` (message without a path; the caller adds it), `.unsupportedVersion`.
    static func parse(_ bytes: [UInt8]) throws(ProtectionError) -> (contents: KeybagContents, body: ArraySlice<UInt8>, mac: [UInt8]) {
        guard bytes.count >= 8, Array(bytes[0..<8]) == magic else { throw corrupt("it is not a keybag (no keybag magic)") }
        guard bytes.count >= headerSize + macSize + checksumSize else { throw corrupt("it is truncated (\(bytes.count) bytes)") }
        guard bytes[8] == version else {
            throw ProtectionError(.unsupportedVersion, "the keybag uses format version \(bytes[8]); this library reads version \(version); upgrade swift-data-protection")
        }
        guard bytes[9] == 0 else { throw corrupt("unknown flags \(bytes[9])") }
        let count = Int(bytes.readBE(UInt16.self, at: 10))
        guard (ProtectionClass.allCases.count...maxEntries).contains(count) else { throw corrupt("\(count) entries") }
        let expected = headerSize + count * entrySize + macSize + checksumSize
        guard bytes.count == expected else {
            throw corrupt(bytes.count < expected ? "it is truncated (\(bytes.count) of \(expected) bytes)" : "it has \(bytes.count - expected) trailing bytes")
        }
        let sum = try checksum(bytes[0..<(expected - checksumSize)])
        let intact = sum.withUnsafeBytes { a in bytes[(expected - checksumSize)...].withUnsafeBytes { GenericHash.equal(a, $0) } }
        guard intact else { throw corrupt("its checksum does not match: it was damaged") }
        let kdf = Argon2Parameters(opsLimit: bytes.readBE(UInt64.self, at: 28), memLimit: bytes.readBE(UInt64.self, at: 36))
        guard kdf.isValid else { throw corrupt("Argon2id parameters out of range") }
        var entries: [KeybagEntry] = []
        var at = headerSize
        for _ in 0..<count {
            guard let c = ProtectionClass(rawValue: bytes[at]) else { throw corrupt("unknown protection class \(bytes[at])") }
            let g = bytes.readBE(UInt32.self, at: at + 1)
            guard g > 0 else { throw corrupt("generation 0 of class \(c)") }
            let pk = Array(bytes[(at + 5)..<(at + 37)])
            if c.usesPublicKeySealing == pk.allSatisfy({ $0 == 0 }) { throw corrupt("the public key of class \(c) generation \(g) is \(c.usesPublicKeySealing ? "missing" : "unexpected")") }
            let w = at + 37, s = w + wrappedSize
            entries.append(KeybagEntry(
                protectionClass: c, generation: g, publicKey: c.usesPublicKeySealing ? pk : nil,
                wrapped: Array(bytes[w..<s]), recoverySealed: Array(bytes[s..<(s + sealedSize)])))
            at += entrySize
        }
        for c in ProtectionClass.allCases where !entries.contains(where: { $0.protectionClass == c }) {
            throw corrupt("class \(c) has no key")
        }
        guard Set(entries.map { "\($0.protectionClass.rawValue)/\($0.generation)" }).count == entries.count else {
            throw corrupt("a class-key generation appears twice")
        }
        let contents = KeybagContents(
            domainID: try DomainID(bytes: Array(bytes[12..<28])), kdf: kdf, salt: Array(bytes[44..<60]),
            recoveryPublicKey: Array(bytes[60..<92]), entries: entries)
        return (contents, bytes[0..<at], Array(bytes[at..<(at + macSize)]))
    }

    /// The unkeyed BLAKE2b-256 checksum of `bytes`.
    static func checksum(_ bytes: ArraySlice<UInt8>) throws(ProtectionError) -> [UInt8] {
        try bytes.withUnsafeBytes { b in Result { () throws(ProtectionError) in try crypto { () throws(CryptoError) in try GenericHash.hash(b) } } }.get()
    }

    static func corrupt(_ what: String) -> ProtectionError {
        ProtectionError(.corruptKeybag, "the keybag is corrupt (\(what)); restore it from a backup, or run `dpctl recover` with the recovery key")
    }
}
