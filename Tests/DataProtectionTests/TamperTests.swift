import DataProtectionFormat
import Foundation
import DataProtection
import ProtectionCrypto
import XCTest

/// Tamper suite in the style of Tink's streaming-AEAD tests: every mutant ends
/// in the exact original plaintext or a typed error, never in wrong bytes.
final class TamperTests: XCTestCase {
    static let detected: Set<ProtectionError.Code> = [.authenticationFailed, .corruptHeader, .notProtected, .unsupportedVersion, .unsupportedFeature]
    let cs = 4096

    struct Outcome { var tried = 0, detected = 0, intact = 0 }

    /// Opens the mutant and reads it all: must equal `original` or throw a detection error.
    func check(_ files: ProtectedFiles, _ bytes: [UInt8], original: [UInt8], at path: String, _ what: String, _ out: inout Outcome) throws {
        try writeBytes(bytes, path)
        out.tried += 1
        do {
            let got = try files.read(path)
            XCTAssertEqual(got, original, "mutant '\(what)' returned wrong bytes")
            out.intact += 1
        } catch let e as ProtectionError {
            XCTAssertTrue(Self.detected.contains(e.code), "mutant '\(what)': unexpected error \(e.code): \(e.message)")
            out.detected += 1
        }
    }

    func testTamperSuite() throws {
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        var out = Outcome()
        var rng = TestRNG(seed: 7)
        for cipher in AEADCipher.allCases where cipher.isAvailable {
            let files = ProtectedFiles(keys: keys, options: .init(cipher: cipher, chunkSize: cs))
            let overhead = ChunkCipher.forNewFiles(cipher).overhead, stride = cs + overhead
            for cls in [ProtectionClass.complete, .completeUnlessOpen] {
                for n in [0, 1, cs - 1, cs, cs + 1, 3 * cs + 7] {
                    let plain = rng.bytes(n)
                    let a = "\(dir)/a", b = "\(dir)/b", m = "\(dir)/m"
                    try files.write(plain, to: a, protection: cls)
                    try files.write(rng.bytes(n), to: b, protection: cls)  // same keys, other file
                    let fa = try readBytes(a), fb = try readBytes(b)
                    let chunks = (fa.count - 176 + stride - 1) / stride
                    func chunk(_ f: [UInt8], _ i: Int) -> ArraySlice<UInt8> { f[(176 + i * stride)..<min(f.count, 176 + (i + 1) * stride)] }

                    // Every bit of the header.
                    for bit in 0..<(176 * 8) {
                        var x = fa; x[bit / 8] ^= 1 << (bit % 8)
                        try check(files, x, original: plain, at: m, "header bit \(bit)", &out)
                    }
                    // A sample of body bits: each chunk's nonce, ciphertext start/middle/end and tag, plus every 61st bit.
                    var bodyBits = Set<Int>()
                    for i in 0..<chunks {
                        let s = 176 + i * stride, e = min(fa.count, s + stride)
                        for off in [s, s + overhead - 16, (s + e) / 2, e - 17, e - 1] where off >= s && off < e { bodyBits.insert(off * 8 + 3) }
                    }
                    for bit in Swift.stride(from: 176 * 8, to: fa.count * 8, by: 61) { bodyBits.insert(bit) }
                    for bit in bodyBits.sorted() {
                        var x = fa; x[bit / 8] ^= 1 << (bit % 8)
                        try check(files, x, original: plain, at: m, "body bit \(bit)", &out)
                    }
                    // Truncation: every chunk boundary, and offsets inside chunks and the header.
                    var cuts = Set([0, 1, 8, 100, 175, 176, 177])
                    for i in 0...chunks {
                        let bnd = 176 + i * stride
                        for d in [-overhead - 1, -overhead, -17, -16, -1, 0, 1, overhead, overhead + 1] { cuts.insert(bnd + d) }
                    }
                    for cut in cuts.sorted() where cut >= 0 && cut < fa.count {
                        try check(files, Array(fa[0..<cut]), original: plain, at: m, "truncated at \(cut)", &out)
                    }
                    // Extension: garbage, an empty chunk's worth, a copy of the last chunk.
                    try check(files, fa + [0], original: plain, at: m, "extended by 1", &out)
                    try check(files, fa + rng.bytes(overhead), original: plain, at: m, "extended by an empty chunk", &out)
                    try check(files, fa + Array(chunk(fa, chunks - 1)), original: plain, at: m, "last chunk duplicated", &out)
                    // Chunk deletion, duplication and swaps.
                    for i in 0..<chunks where chunks > 1 {
                        var del = Array(fa[0..<176])
                        for k in 0..<chunks where k != i { del += chunk(fa, k) }
                        try check(files, del, original: plain, at: m, "chunk \(i) deleted", &out)
                        var dup = Array(fa[0..<176])
                        for k in 0..<chunks { dup += chunk(fa, k); if k == i { dup += chunk(fa, k) } }
                        try check(files, dup, original: plain, at: m, "chunk \(i) duplicated", &out)
                        if i + 1 < chunks {
                            var sw = Array(fa[0..<176])
                            for k in 0..<chunks { sw += chunk(fa, k == i ? i + 1 : (k == i + 1 ? i : k)) }
                            try check(files, sw, original: plain, at: m, "chunks \(i),\(i + 1) swapped", &out)
                        }
                    }
                    // Splices between two files under the same keys: header of one, body of the other; single chunks.
                    try check(files, Array(fb[0..<176]) + Array(fa[176...]), original: plain, at: m, "header from another file", &out)
                    for i in 0..<chunks where fb.count == fa.count {
                        var sp = Array(fa[0..<176])
                        for k in 0..<chunks { sp += (k == i ? chunk(fb, k) : chunk(fa, k)) }
                        try check(files, sp, original: plain, at: m, "chunk \(i) from another file", &out)
                    }
                    // The unmodified file still reads.
                    try check(files, fa, original: plain, at: m, "unmodified", &out)
                }
            }
        }
        XCTAssertEqual(out.tried, out.detected + out.intact)
        // Only the unmodified copies may read back intact.
        XCTAssertEqual(out.intact, AEADCipher.allCases.filter(\.isAvailable).count * 2 * 6)
        print("tamper suite: \(out.tried) mutants tried, \(out.detected) detected with a typed error, \(out.intact) unmodified controls read intact, 0 returned wrong bytes")
    }
}
