#if canImport(Glibc)
import Glibc
#endif
import ProtectionCrypto

/// One generation of one class key as the keybag stores it: wrapped twice, never in plaintext.
public struct KeybagEntry: Equatable, Sendable {
    /// The class this key belongs to.
    public var protectionClass: ProtectionClass
    /// The key's generation (1, then one more per rotation).
    public var generation: UInt32
    /// Format 1 only: class B's X25519 public key in the clear (wrapped on the next write).
    public var publicKey: [UInt8]?
    /// Format 2: class B's public key, `KeyWrap`ped under the device secret's class-B subkey, so a copy of
    /// the keybag alone cannot be used to seal (forge) class-B files; the device secret is there while locked.
    public var wrappedPublicKey: [UInt8]?
    /// `KeyWrap` under the passphrase KEK (classes A–C) or the device secret's class-D key (class `none`).
    public var wrapped: [UInt8]
    /// `KeySealing` to the recovery public key, so the recovery key alone restores it.
    public var recoverySealed: [UInt8]

    /// An entry from its fields (format 2 sets `wrappedPublicKey`, format 1 `publicKey`, for class B only).
    public init(
        protectionClass: ProtectionClass, generation: UInt32, publicKey: [UInt8]? = nil, wrappedPublicKey: [UInt8]? = nil, wrapped: [UInt8],
        recoverySealed: [UInt8]
    ) {
        self.protectionClass = protectionClass
        self.generation = generation
        self.publicKey = publicKey
        self.wrappedPublicKey = wrappedPublicKey
        self.wrapped = wrapped
        self.recoverySealed = recoverySealed
    }
}

/// What lets `recover` trust the recovery entries: a key derived from the recovery key alone, and its MAC over them.
public struct RecoveryAuthentication: Equatable, Sendable {
    /// The recovery authentication key, `KeyWrap`ped under the passphrase KEK (so rotation and `passwd` can re-MAC).
    public var wrappedKey: [UInt8]
    /// Keyed BLAKE2b-256 (key: the recovery authentication key) of `KeybagContents.recoverySection()`.
    public var mac: [UInt8]

    /// The wrapped key and its MAC.
    public init(wrappedKey: [UInt8], mac: [UInt8]) {
        self.wrappedKey = wrappedKey
        self.mac = mac
    }
}

/// What binds a keybag's passphrase KEK to this machine beyond the device secret (format 3; absent: the file alone).
public enum KeybagBinding: Equatable, Sendable {
    /// An HMAC key inside a TPM 2.0: its marshalled TPM2B_PUBLIC and TPM2B_PRIVATE (encrypted under that TPM's storage key).
    case tpm2(public: [UInt8], private: [UInt8])

    /// The record's kind byte.
    package var kind: UInt8 { 1 }
}

/// The keybag file, format v2 or v3 (v1 still read): pure encoding and parsing, no keys and no I/O.
///
/// Layout of v2 (integers big-endian; FORMAT.md §12 is normative):
/// ```
///   0  magic "\x89DPK\r\n\x1a\n" (8)   8 version = 2 (1)   9 flags (1): bit 0 = recovery entries authenticated   10 entry count (u16)
///  12  domain identifier (16)
///  28  Argon2id ops (u64)   36 Argon2id memory bytes (u64)   44 salt (16)
///  60  recovery X25519 public key (32)
///  92  device-secret identifier (16): which device secret seals this keybag
/// 108  recovery authentication key, KeyWrap under the passphrase KEK (72)   } zero when
/// 180  recovery MAC (32)                                                    } flag bit 0 is clear
/// 212  entries: class (1) ‖ generation (u32) ‖ wrapped public key (KeyWrap, 72; zero unless class B)
///               ‖ wrapped (KeyWrap, 72) ‖ recovery-sealed (KeySealing, 104)      = 253 bytes each
///   …  MAC (32): keyed BLAKE2b-256 (key: the device secret's MAC subkey) of every byte before it
///   …  checksum (32): unkeyed BLAKE2b-256 of every byte before it
/// ```
/// v1 is the same up to byte 92, where its entries start: class ‖ generation ‖ public key in
/// the clear (32) ‖ wrapped ‖ recovery-sealed (213 bytes each). It is read, and written as v2
/// by the next keybag write.
/// v3 is v2 with flag bit 1 set and a binding record between the entries and the MAC:
/// kind (1; 1 = tpm2) ‖ public blob length (u16) ‖ public blob ‖ private blob length (u16) ‖ private blob
/// (each 1…`maxBlobSize` bytes). A keybag without a binding is written as v2, byte for byte as before.
/// The checksum catches accidental damage before any key is needed (a flipped
/// domain identifier would otherwise look like a missing device secret); the
/// MAC catches deliberate changes.
/// Every field is validated; a wrong length, an unknown value, a missing
/// class, a duplicated or non-contiguous generation or trailing bytes make the whole keybag
/// `.corruptKeybag`, never half-read.
public struct KeybagContents: Equatable, Sendable {
    /// The keybag magic, bytes 0..<8.
    public static let magic: [UInt8] = [0x89, 0x44, 0x50, 0x4B, 0x0D, 0x0A, 0x1A, 0x0A]
    /// The newest version (written for a keybag with a binding record; one without is written as `unboundVersion`).
    public static let version: UInt8 = 3
    /// The version written for a keybag without a binding record (the file alone binds it).
    public static let unboundVersion: UInt8 = 2
    /// The largest TPM blob a binding record holds.
    package static let maxBlobSize = 1024
    /// Bytes before the first entry (format 2).
    public static let headerSize = 212
    package static let wrappedSize = 32 + KeyWrap.overhead
    package static let sealedSize = 32 + KeySealing.overhead
    package static let entrySize = 1 + 4 + wrappedSize + wrappedSize + sealedSize
    /// Bytes of the device-secret identifier.
    public static let deviceSecretIDSize = 16
    /// Bytes of the MAC after the entries.
    public static let macSize = 32
    /// Bytes of the checksum that ends the file.
    public static let checksumSize = 32
    package static let maxEntries = 64
    package static let maxSize = headerSize + maxEntries * entrySize + 5 + 2 * maxBlobSize + macSize + checksumSize
    /// Format 1's header and entry sizes.
    package static let v1HeaderSize = 92, v1EntrySize = 1 + 4 + 32 + wrappedSize + sealedSize

    /// 1 when read from a v1 file (until the next write), 2 without a binding, 3 with one.
    public var version: UInt8
    /// The domain the keybag belongs to, bound into every entry's wrapping.
    public var domainID: DomainID
    /// The Argon2id parameters of the passphrase KEK.
    public var kdf: Argon2Parameters
    /// The Argon2id salt (16 bytes).
    public var salt: [UInt8]
    /// The recovery key's X25519 public key, to which every entry is also sealed.
    public var recoveryPublicKey: [UInt8]
    /// The identifier of the device secret whose MAC key sealed this keybag (v2; zero until the first write).
    public var deviceSecretID: [UInt8]
    /// Nil for a v1 keybag, or one upgraded from v1 without the recovery key at hand: `recover` then mints fresh keys.
    public var recoveryAuthentication: RecoveryAuthentication?
    /// Every generation of every class key, in file order.
    public var entries: [KeybagEntry]
    /// What binds the passphrase KEK to the machine besides the device secret (v3); nil: the device secret alone.
    public var binding: KeybagBinding?

    /// Contents from their fields (nothing is checked: `parse` validates, the keybag's MAC authenticates).
    public init(
        version: UInt8 = KeybagContents.version, domainID: DomainID, kdf: Argon2Parameters, salt: [UInt8], recoveryPublicKey: [UInt8],
        deviceSecretID: [UInt8] = [UInt8](repeating: 0, count: KeybagContents.deviceSecretIDSize), recoveryAuthentication: RecoveryAuthentication? = nil,
        entries: [KeybagEntry], binding: KeybagBinding? = nil
    ) {
        self.version = version
        self.domainID = domainID
        self.kdf = kdf
        self.salt = salt
        self.recoveryPublicKey = recoveryPublicKey
        self.deviceSecretID = deviceSecretID
        self.recoveryAuthentication = recoveryAuthentication
        self.entries = entries
        self.binding = binding
    }

    /// The version `body()` writes for these contents: 3 with a binding record, else 2.
    public var writtenVersion: UInt8 { binding == nil ? Self.unboundVersion : Self.version }

    /// The highest generation of `c`: what new files are wrapped with.
    package func current(_ c: ProtectionClass) -> KeybagEntry? {
        entries.filter { $0.protectionClass == c }.max { $0.generation < $1.generation }
    }

    /// The entry for generation `g` of `c`, if the keybag holds it.
    package func entry(_ c: ProtectionClass, _ g: UInt32) -> KeybagEntry? {
        entries.first { $0.protectionClass == c && $0.generation == g }
    }

    /// Associated data of an entry's wrapping: binds it to this format, domain, class, generation and purpose.
    package static func entryAD(_ id: DomainID, _ c: ProtectionClass, _ g: UInt32, recovery: Bool) -> [UInt8] {
        entryAD(id, c, g, purpose: recovery ? 2 : 1)
    }

    /// Associated data of class B's wrapped public key (purpose 3).
    package static func publicKeyAD(_ id: DomainID, _ c: ProtectionClass, _ g: UInt32) -> [UInt8] { entryAD(id, c, g, purpose: 3) }

    private static func entryAD(_ id: DomainID, _ c: ProtectionClass, _ g: UInt32, purpose: UInt8) -> [UInt8] {
        var b = Array("dp-keybag-v1".utf8) + id.bytes + [c.rawValue]
        b.appendBE(g)
        b.append(purpose)
        return b
    }

    /// Associated data of the wrapped recovery authentication key.
    package static func recoveryKeyAD(_ id: DomainID) -> [UInt8] { Array("dp-keybag-v2-recovery-key".utf8) + id.bytes }

    /// What the recovery MAC covers: everything `recover` uses from the keybag.
    ///
    /// The domain, the recovery public key, the Argon2id parameters and every entry's class,
    /// generation and recovery seal, in file order (which is canonical: sorted, no duplicates),
    /// so no entry can be added, removed, swapped or replaced.
    package func recoverySection() -> [UInt8] {
        var b = Array("dp-keybag-v2-recovery".utf8) + domainID.bytes + recoveryPublicKey
        b.appendBE(kdf.opsLimit)
        b.appendBE(kdf.memLimit)
        b.appendBE(UInt16(entries.count))
        for e in entries {
            b.append(e.protectionClass.rawValue)
            b.appendBE(e.generation)
            b += e.recoverySealed
        }
        return b
    }

    /// Every byte the MAC covers, in this contents' version.
    public func body() -> [UInt8] {
        let zeros = { (n: Int) in [UInt8](repeating: 0, count: n) }
        let bound: UInt8 = version >= 3 && binding != nil ? 2 : 0
        var b = Self.magic + [version, (version == 1 || recoveryAuthentication == nil ? 0 : 1) | bound]
        b.appendBE(UInt16(entries.count))
        b += domainID.bytes
        b.appendBE(kdf.opsLimit)
        b.appendBE(kdf.memLimit)
        b += salt
        b += recoveryPublicKey
        if version != 1 {
            b += deviceSecretID
            b += recoveryAuthentication?.wrappedKey ?? zeros(Self.wrappedSize)
            b += recoveryAuthentication?.mac ?? zeros(Self.macSize)
        }
        for e in entries {
            b.append(e.protectionClass.rawValue)
            b.appendBE(e.generation)
            b += version == 1 ? e.publicKey ?? zeros(32) : e.wrappedPublicKey ?? zeros(Self.wrappedSize)
            b += e.wrapped
            b += e.recoverySealed
        }
        if bound != 0, case .tpm2(let pub, let priv)? = binding {
            b.append(binding!.kind)
            b.appendBE(UInt16(pub.count))
            b += pub
            b.appendBE(UInt16(priv.count))
            b += priv
        }
        return b
    }

    /// Parses a whole keybag file (v2, or v1) into its contents, the bytes its MAC covers, and the MAC.
    /// - Throws: `.corruptKeybag` (message without a path; the caller adds it), `.unsupportedVersion`.
    public static func parse(_ bytes: [UInt8]) throws(ProtectionError) -> (contents: KeybagContents, body: ArraySlice<UInt8>, mac: [UInt8]) {
        guard bytes.count >= 8, Array(bytes[0..<8]) == magic else { throw corrupt("it is not a keybag (no keybag magic)") }
        guard bytes.count >= v1HeaderSize + macSize + checksumSize else { throw corrupt("it is truncated (\(bytes.count) bytes)") }
        let v = bytes[8]
        guard (1...version).contains(v) else {
            throw ProtectionError(.unsupportedVersion, "the keybag uses format version \(v); this library reads versions 1 to \(version); upgrade swift-data-protection")
        }
        let header = v == 1 ? v1HeaderSize : headerSize, entry = v == 1 ? v1EntrySize : entrySize, keySize = v == 1 ? 32 : wrappedSize
        // v1: no flags; v2: bit 0 (recovery authenticated); v3: bit 0, and bit 1 (binding record) always.
        let flags = bytes[9]
        guard flags == 0 || (v == 2 && flags == 1) || (v == 3 && flags & ~1 == 2) else { throw corrupt("unknown flags \(flags) for version \(v)") }
        let count = Int(bytes.readBE(UInt16.self, at: 10))
        guard (ProtectionClass.allCases.count...maxEntries).contains(count) else { throw corrupt("\(count) entries") }
        let recordAt = header + count * entry
        let record = v == 3 ? try bindingRecordSize(bytes, at: recordAt) : 0
        let expected = recordAt + record + macSize + checksumSize
        guard bytes.count == expected else {
            throw corrupt(bytes.count < expected ? "it is truncated (\(bytes.count) of \(expected) bytes)" : "it has \(bytes.count - expected) trailing bytes")
        }
        let sum = try checksum(bytes[0..<(expected - checksumSize)])
        let intact = sum.withUnsafeBytes { a in bytes[(expected - checksumSize)...].withUnsafeBytes { GenericHash.equal(a, $0) } }
        guard intact else { throw corrupt("its checksum does not match: it was damaged") }
        let kdf = Argon2Parameters(opsLimit: bytes.readBE(UInt64.self, at: 28), memLimit: bytes.readBE(UInt64.self, at: 36))
        guard kdf.isValid else { throw corrupt("Argon2id parameters out of range") }
        var contents = KeybagContents(
            version: v, domainID: try DomainID(bytes: Array(bytes[12..<28])), kdf: kdf, salt: Array(bytes[44..<60]),
            recoveryPublicKey: Array(bytes[60..<92]), entries: [])
        if v != 1 {
            contents.deviceSecretID = Array(bytes[92..<108])
            let auth = RecoveryAuthentication(wrappedKey: Array(bytes[108..<180]), mac: Array(bytes[180..<212]))
            if flags & 1 == 1 { contents.recoveryAuthentication = auth }
            else if !(auth.wrappedKey + auth.mac).allSatisfy({ $0 == 0 }) { throw corrupt("recovery authentication present but not flagged") }
        }
        var at = header
        for _ in 0..<count {
            guard let c = ProtectionClass(rawValue: bytes[at]) else { throw corrupt("unknown protection class \(bytes[at])") }
            let g = bytes.readBE(UInt32.self, at: at + 1)
            guard g > 0, g < UInt32.max else { throw corrupt("generation \(g) of class \(c)") }
            let pk = Array(bytes[(at + 5)..<(at + 5 + keySize)])
            if c.usesPublicKeySealing == pk.allSatisfy({ $0 == 0 }) { throw corrupt("the public key of class \(c) generation \(g) is \(c.usesPublicKeySealing ? "missing" : "unexpected")") }
            let w = at + 5 + keySize, s = w + wrappedSize
            contents.entries.append(KeybagEntry(
                protectionClass: c, generation: g, publicKey: v == 1 && c.usesPublicKeySealing ? pk : nil,
                wrappedPublicKey: v != 1 && c.usesPublicKeySealing ? pk : nil,
                wrapped: Array(bytes[w..<s]), recoverySealed: Array(bytes[s..<(s + sealedSize)])))
            at += entry
        }
        if v == 3 {
            guard bytes[at] == 1 else { throw corrupt("unknown binding kind \(bytes[at])") }
            let pubCount = Int(bytes.readBE(UInt16.self, at: at + 1))
            let pub = Array(bytes[(at + 3)..<(at + 3 + pubCount)])
            let privCount = Int(bytes.readBE(UInt16.self, at: at + 3 + pubCount))
            contents.binding = .tpm2(public: pub, private: Array(bytes[(at + 5 + pubCount)..<(at + 5 + pubCount + privCount)]))
            at += record
        }
        for c in ProtectionClass.allCases {
            let gens = contents.entries.filter { $0.protectionClass == c }.map(\.generation).sorted()
            guard let first = gens.first else { throw corrupt("class \(c) has no key") }
            guard Set(gens).count == gens.count else { throw corrupt("a class-key generation appears twice") }
            // Rotation only ever adds the next generation and retires the oldest ones: a gap is a planted or dropped entry.
            guard gens.last! - first == UInt32(gens.count - 1) else { throw corrupt("the generations of class \(c) are not contiguous (\(gens.map(String.init).joined(separator: ", ")))") }
        }
        return (contents, bytes[0..<at], Array(bytes[at..<(at + macSize)]))
    }

    /// The size of the binding record at `at`, after checking that its lengths fit the file and `maxBlobSize`.
    private static func bindingRecordSize(_ bytes: [UInt8], at: Int) throws(ProtectionError) -> Int {
        let tail = macSize + checksumSize
        guard bytes.count >= at + 3 + tail else { throw corrupt("it is truncated (no binding record)") }
        let pubCount = Int(bytes.readBE(UInt16.self, at: at + 1))
        guard (1...maxBlobSize).contains(pubCount), bytes.count >= at + 5 + pubCount + tail else { throw corrupt("a binding record's public blob of \(pubCount) bytes") }
        let privCount = Int(bytes.readBE(UInt16.self, at: at + 3 + pubCount))
        guard (1...maxBlobSize).contains(privCount) else { throw corrupt("a binding record's private blob of \(privCount) bytes") }
        return 5 + pubCount + privCount
    }

    /// The unkeyed BLAKE2b-256 checksum of `bytes`.
    public static func checksum(_ bytes: ArraySlice<UInt8>) throws(ProtectionError) -> [UInt8] {
        try bytes.withUnsafeBytes { b in Result { () throws(ProtectionError) in try crypto { () throws(CryptoError) in try GenericHash.hash(b) } } }.get()
    }

    /// The `.corruptKeybag` error saying `what` is wrong, and the fix.
    package static func corrupt(_ what: String) -> ProtectionError {
        ProtectionError(.corruptKeybag, "the keybag is corrupt (\(what)); restore it from a backup, or run `dpctl recover` with the recovery key")
    }
}
