/// The AES-256 key schedule (FIPS-197 §5.2), computed here so that the key-residue scan can look for what a cipher
/// backend keeps of a key once it is scheduled, independently of any backend.
enum AESKeySchedule {
    /// The S-box, built from the multiplicative inverse in GF(2⁸) and the affine map (FIPS-197 §5.1.1).
    static let sbox: [UInt8] = {
        var box = [UInt8](repeating: 0x63, count: 256)
        var p: UInt8 = 1, q: UInt8 = 1
        repeat {
            p = p ^ (p << 1) ^ (p & 0x80 != 0 ? 0x1B : 0)  // p · 3
            q ^= q << 1; q ^= q << 2; q ^= q << 4; if q & 0x80 != 0 { q ^= 0x09 }  // q / 3, so q = p⁻¹
            box[Int(p)] = q ^ (q << 1 | q >> 7) ^ (q << 2 | q >> 6) ^ (q << 3 | q >> 5) ^ (q << 4 | q >> 4) ^ 0x63
        } while p != 1
        return box
    }()

    /// Round keys 2 and 3 (schedule bytes 32..<64) of the 32-byte AES-256 `key`: the first round keys that are not the
    /// key itself, so they exist in memory only where a backend expanded the key.
    static func roundKeys2And3(of key: [UInt8]) -> [UInt8] {
        precondition(key.count == 32)
        var w = key
        for i in 8..<16 {
            var t = Array(w[(i - 1) * 4..<i * 4])
            if i == 8 { t = [sbox[Int(t[1])] ^ 0x01, sbox[Int(t[2])], sbox[Int(t[3])], sbox[Int(t[0])]] }  // RotWord, SubWord, Rcon[1]
            if i == 12 { t = t.map { sbox[Int($0)] } }  // SubWord
            w += (0..<4).map { w[(i - 8) * 4 + $0] ^ t[$0] }
        }
        return Array(w[32..<64])
    }
}
