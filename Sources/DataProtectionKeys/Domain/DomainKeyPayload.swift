import DataProtectionFormat
import ProtectionCrypto

/// The payload of a domain key in the kernel keyring: the unlocked class keys of one domain, by class and generation.
///
/// Layout (version 1, big-endian, as the keybag; README "Kernel keyring"):
///
///     version u8 = 1 | flags u8 (bit 0: a deadline follows) | [deadline i64: UNIX seconds]
///     then per class key: class u8 (1 A, 2 B, 3 C) | generation u32 | secret 32 bytes
///
/// Parsing is pure and never traps on a malformed payload: an unknown version, a bad length or an unknown class
/// reads as "no keys" (locked), which is what a reader must conclude from a key it cannot understand.
/// The whole payload is secret; it is only ever built and read in locked memory (`SecretBytes`).
package enum DomainKeyPayload {
    static let version: UInt8 = 1
    static let flagDeadline: UInt8 = 1
    /// Bytes per class key: class, generation, secret.
    static let entrySize = 1 + 4 + 32
    /// The largest payload read without asking its length first (a small `SecretBytes` pool slot).
    static let typicalCapacity = 256

    /// Where one class key sits in a payload.
    struct Entry: Equatable {
        var protectionClass: ProtectionClass
        var generation: UInt32
        /// Offset of its 32 secret bytes.
        var offset: Int
    }

    /// The header's size with or without a deadline.
    static func headerSize(deadline: Bool) -> Int { deadline ? 10 : 2 }

    /// Bytes of a payload holding `keys` class keys.
    package static func size(keys: Int, deadline: Bool) -> Int { headerSize(deadline: deadline) + keys * entrySize }

    /// The entries of `p`, or nil when it is not a version-1 payload of whole entries.
    static func entries(_ p: UnsafeRawBufferPointer) -> [Entry]? {
        guard p.count >= 2, p[0] == version, p[1] & ~flagDeadline == 0 else { return nil }
        var at = headerSize(deadline: p[1] & flagDeadline != 0)
        guard p.count >= at, (p.count - at) % entrySize == 0 else { return nil }
        var out: [Entry] = []
        out.reserveCapacity((p.count - at) / entrySize)
        while at < p.count {
            guard let c = ProtectionClass(rawValue: p[at]), c != .none else { return nil }
            out.append(Entry(protectionClass: c, generation: readUInt32(p, at + 1), offset: at + 5))
            at += entrySize
        }
        return out
    }

    /// Offset of the secret of generation `g` of `c` in `p`, if it is there (the read path: no allocation).
    static func offset(of c: ProtectionClass, _ g: UInt32, in p: UnsafeRawBufferPointer) -> Int? {
        guard p.count >= 2, p[0] == version else { return nil }
        var at = headerSize(deadline: p[1] & flagDeadline != 0)
        while at + entrySize <= p.count {
            if p[at] == c.rawValue && readUInt32(p, at + 1) == g { return at + 5 }
            at += entrySize
        }
        return nil
    }

    /// The deadline the payload records, if any.
    static func deadline(_ p: UnsafeRawBufferPointer) -> Int64? {
        guard p.count >= 10, p[0] == version, p[1] & flagDeadline != 0 else { return nil }
        var v: UInt64 = 0
        for i in 2..<10 { v = v << 8 | UInt64(p[i]) }
        return Int64(bitPattern: v)
    }

    /// A new payload: the entries of `old` that `keep` accepts and are not replaced, then `added` (class keys with their secrets).
    ///
    /// - Parameters:
    ///   - old: the current payload (empty for none); entries are copied from it in locked memory.
    ///   - keep: which of the old entries stay.
    ///   - added: new class keys; one of the same class and generation replaces the old entry.
    ///   - deadline: the deadline to record, if any.
    /// - Returns: the payload, or nil when it would hold no class key (the key should then go).
    static func build(
        from old: UnsafeRawBufferPointer, keeping keep: (Entry) -> Bool, adding added: [ClassKey], deadline: Int64?
    ) throws(ProtectionError) -> SecretBytes? {
        let kept = (entries(old) ?? []).filter { e in
            keep(e) && !added.contains { $0.protectionClass == e.protectionClass && $0.generation == e.generation }
        }
        let count = kept.count + added.count
        guard count > 0 else { return nil }
        var out = try crypto { () throws(CryptoError) in try SecretBytes(zeroedCount: size(keys: count, deadline: deadline != nil)) }
        try out.withUnsafeMutableBytes { (b) throws(ProtectionError) in
            b[0] = version
            b[1] = deadline == nil ? 0 : flagDeadline
            if let deadline { for i in 0..<8 { b[2 + i] = UInt8(truncatingIfNeeded: UInt64(bitPattern: deadline) >> (56 - 8 * i)) } }
            var at = headerSize(deadline: deadline != nil)
            func header(_ c: ProtectionClass, _ g: UInt32) {
                b[at] = c.rawValue
                for i in 0..<4 { b[at + 1 + i] = UInt8(truncatingIfNeeded: g >> (24 - 8 * i)) }
            }
            for e in kept {
                header(e.protectionClass, e.generation)
                b.baseAddress!.advanced(by: at + 5).copyMemory(from: old.baseAddress!.advanced(by: e.offset), byteCount: 32)
                at += entrySize
            }
            for k in added {
                guard let s = k.secret, s.secret.count == 32 else { throw ProtectionError.locked(k.protectionClass) }
                header(k.protectionClass, k.generation)
                s.secret.withUnsafeBytes { b.baseAddress!.advanced(by: at + 5).copyMemory(from: $0.baseAddress!, byteCount: 32) }
                at += entrySize
            }
        }
        return out
    }

    private static func readUInt32(_ p: UnsafeRawBufferPointer, _ at: Int) -> UInt32 {
        UInt32(p[at]) << 24 | UInt32(p[at + 1]) << 16 | UInt32(p[at + 2]) << 8 | UInt32(p[at + 3])
    }
}
