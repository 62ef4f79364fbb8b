import DataProtectionFormat
import Foundation
import DataProtection
import ProtectionCrypto
import XCTest

/// The nonce budget of protected files (FORMAT.md §7): no writer can reach it.
///
/// Format version 2 seals AES-256-GCM chunks under a subkey per 12-byte key
/// nonce (`AEADNonceMode.extended`), so a nonce repeats only if two seals share
/// both 96-bit random halves (q²/2^193 after q seals), whatever mix of appends
/// and in-place writes made them. Version-1 files keep their format, and their
/// 2^32-seal budget, until a whole-file write replaces them.
final class NonceBudgetTests: XCTestCase {
    /// One handle is one writer session: every seal it makes, over batches and appends, shares one key nonce, and its
    /// GCM halves are R ⊕ k for its seals k = 0, 1, 2, … in order, so none repeats. Read from the bytes on disk.
    /// (Before writer sessions, every batch and every append drew a key nonce of its own.)
    func testOneHandleSealsUnderOneKeyNonceWithNumberedGCMNonces() throws {
        try XCTSkipUnless(AEADCipher.aes256gcm.isAvailable, "AES-256-GCM is not available on this CPU")
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(cipher: .aes256gcm, chunkSize: 4096))
        let path = "\(dir)/appended"
        var rng = TestRNG(seed: 19)
        let first = rng.bytes(3 << 20 + 100)  // three 1 MiB batches and a partial chunk, in one call
        let h = try files.create(path, protection: .complete)  // seal 0: the empty chunk 0
        try h.write(first, at: 0)  // seals 1…769: chunks 0…768
        let cs = 4096, overhead = 40, slotStride = cs + overhead
        let onDisk = try readBytes(path)
        XCTAssertEqual(onDisk[8], 2, "format version")
        XCTAssertEqual(onDisk[10], 3, "cipher: AES-256-GCM with extended nonces")
        XCTAssertEqual(onDisk.count, 176 + first.count + (first.count / cs + 1) * overhead)
        var seals: [[UInt8]] = []  // every 24-byte nonce sealed, in order
        let chunks = first.count / cs + 1
        for i in 0..<chunks { seals.append(Array(onDisk[(176 + i * slotStride)..<(176 + i * slotStride + 24)])) }
        // 2,000 appends of 100 bytes: each re-seals the last chunk (and seals a new one when it crosses a chunk end).
        var model = first
        let appends = 2_000
        for a in 0..<appends {
            let piece = rng.bytes(100)
            try h.append(piece)
            model += piece
            let last = (model.count - 1) / cs
            seals.append(try pread(path, at: 176 + last * slotStride, count: 24))
            XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int, 176 + model.count + (last + 1) * overhead, "append \(a)")
        }
        try h.sync()
        h.close()
        XCTAssertEqual(try files.read(path), model)
        XCTAssertEqual(Set(seals).count, seals.count, "a nonce was used twice")
        XCTAssertEqual(Set(seals.map { Array($0[0..<12]) }).count, 1, "one handle, one key nonce")
        XCTAssertEqual(Set(seals.map { Array($0[12..<20]) }).count, 1, "R's first eight bytes are in every GCM nonce")
        // Seal k's GCM nonce ends in R ⊕ k: chunk i of the write was seal 1 + i, and the appends count on from there.
        func low(_ n: [UInt8]) -> UInt32 { n[20..<24].reduce(0) { $0 << 8 | UInt32($1) } }
        let r = low(seals[0]) ^ 1
        let numbers = seals.map { low($0) ^ r }
        XCTAssertEqual(Array(numbers[0..<chunks]), (0..<chunks).map { UInt32(1 + $0) })
        XCTAssertTrue(zip(numbers, numbers.dropFirst()).allSatisfy { $0 < $1 }, "seal numbers increase")
        print("nonce budget: \(seals.count) seals observed (\(chunks) by one 3 MiB write, \(appends) appends) under one key nonce, seal numbers 1…\(numbers.last!), all nonces distinct")
    }

    /// A handle draws a fresh key nonce and R when its seal number reaches the limit (an injected 7 instead of 2^32);
    /// a second session draws its own; and a reader of the resulting file, whose chunks lie under many key nonces,
    /// reads every byte right in any order (its one cached subkey switching back and forth, on both pipeline threads).
    func testKeyNonceChangesAtTheLimitAndPerSessionAndReadersSwitchSubkeys() throws {
        try XCTSkipUnless(AEADCipher.aes256gcm.isAvailable, "AES-256-GCM is not available on this CPU")
        let dir = try temporaryDirectory(self)
        let limit = 7
        let keys = try InMemoryClassKeys.random()
        let files = ProtectedFiles(keys: keys, options: .init(cipher: .aes256gcm, chunkSize: 4096), sealsPerKeyNonce: UInt64(limit))
        let path = "\(dir)/many"
        var rng = TestRNG(seed: 61)
        let cs = 4096, slotStride = cs + 40
        var model = rng.bytes(100 * cs + 123)  // seal 0: the empty chunk; seals 1…101: chunks 0…100
        let h = try files.create(path, protection: .complete)
        try h.write(model, at: 0)
        let onDisk = try readBytes(path)
        let nonces = (0...100).map { Array(onDisk[(176 + $0 * slotStride)..<(176 + $0 * slotStride + 24)]) }
        for (i, n) in nonces.enumerated() where i > 0 {
            let seal = 1 + i, group = seal / limit
            if seal % limit != 0 { XCTAssertEqual(Array(n[0..<12]), Array(nonces[i - 1][0..<12]), "chunk \(i): same key nonce as the seal before") }
            else { XCTAssertNotEqual(Array(n[0..<12]), Array(nonces[i - 1][0..<12]), "chunk \(i): seal \(seal) starts key nonce \(group)") }
        }
        XCTAssertEqual(Set(nonces.map { Array($0[0..<12]) }).count, 101 / limit + 1, "seals 1…101 under key nonces 0…14")
        XCTAssertEqual(Set(nonces).count, nonces.count)
        for _ in 0..<20 {
            let piece = rng.bytes(1000)
            try h.append(piece)
            model += piece
        }
        h.close()
        // A second session on the same file: its seals start under a key nonce of their own.
        let before = Set((0..<(model.count / cs + 1)).map { Array(try! pread(path, at: 176 + $0 * slotStride, count: 12)) })
        let w = try files.open(path, forWriting: true)
        try w.write([9, 9, 9], at: 5 * Int64(cs) + 1)
        model.replaceSubrange((5 * cs + 1)..<(5 * cs + 4), with: [9, 9, 9])
        w.close()
        let rewritten = try pread(path, at: 176 + 5 * slotStride, count: 12)
        XCTAssertFalse(before.contains(rewritten), "a second session reused a key nonce")
        // Readers: the whole file (two pipeline threads, pieces crossing key nonces), then random reads.
        XCTAssertEqual(try files.read(path), model)
        let r = try files.open(path)
        defer { r.close() }
        var reads = 0
        for _ in 0..<600 {
            let offset = Int(rng.next() % UInt64(model.count)), count = 1 + Int(rng.next() % UInt64(3 * cs))
            let got = try r.read(at: Int64(offset), count: count)
            XCTAssertEqual(got, Array(model[offset..<min(model.count, offset + count)]), "read of \(count) at \(offset)")
            reads += 1
        }
        let keyNonces = Set((0..<(model.count / cs + 1)).map { Array(try! pread(path, at: 176 + $0 * slotStride, count: 12)) })
        print("nonce budget: limit \(limit) seals per key nonce; the file's \(model.count / cs + 1) chunks lie under \(keyNonces.count) key nonces; \(reads) random reads and a whole read match")
    }

    /// `count` bytes of the file at `path` from `offset`.
    func pread(_ path: String, at offset: Int, count: Int) throws -> [UInt8] {
        let f = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? f.close() }
        try f.seek(toOffset: UInt64(offset))
        return [UInt8](try f.read(upToCount: count) ?? Data())
    }

    /// A session switches subkeys whenever the key nonce changes, and what it seals opens with a fresh session and
    /// with plain AES-256-GCM under the derived subkey (the second nonce half as the GCM nonce); a changed key nonce
    /// does not open.
    func testSessionDerivesTheSubkeyOfEachKeyNonce() throws {
        try XCTSkipUnless(AEADCipher.aes256gcm.isAvailable, "AES-256-GCM is not available on this CPU")
        let master = try SecretBytes.random(count: 32)
        let key = try AEADKey(.aes256gcm, key: try master.duplicate(), nonceMode: .extended, sealsPerKeyNonce: 3)  // a key nonce per 3 seals
        XCTAssertEqual(key.nonceSize, 24)
        XCTAssertThrowsError(try { () throws in _ = try AEADKey(.xchacha20poly1305, key: master, nonceMode: .extended) }())
        // Two runs of three seals (the limit: the second draws a new key nonce), interleaved as a reader meets them.
        let raw = UnsafeMutableRawBufferPointer.allocate(byteCount: 6 * 24 + 25 + 100, alignment: 16)
        defer { raw.deallocate() }
        try key.fillNonces(raw.baseAddress!, count: 3, stride: 24)
        try key.fillNonces(raw.baseAddress! + 72, count: 3, stride: 24)
        let drawn = (0..<6).map { Array(raw[($0 * 24)..<($0 * 24 + 24)]) }
        let a = Array(drawn[0..<3]), b = Array(drawn[3..<6])
        for k in 1..<3 {  // one key nonce per run; GCM halves R ⊕ k
            for batch in [a, b] {
                XCTAssertEqual(Array(batch[k][0..<23]), Array(batch[0][0..<23]))
                XCTAssertEqual(batch[k][23], batch[0][23] ^ UInt8(k))
            }
        }
        XCTAssertNotEqual(Array(a[0][0..<12]), Array(b[0][0..<12]))
        let nonces = [a[0], a[1], b[0], a[2], b[1], b[2]]
        let ad = UnsafeRawBufferPointer(start: raw.baseAddress! + 144, count: 25)
        for i in 0..<25 { raw[144 + i] = UInt8(i + 1) }
        let text = raw.baseAddress! + 169
        var sealed: [([UInt8], [UInt8])] = []
        key.withSession { s in
            for (i, n) in nonces.enumerated() {
                var tag = [UInt8](repeating: 0, count: 16)
                text.initializeMemory(as: UInt8.self, repeating: UInt8(i), count: 100)
                s.seal(text, count: 100, into: text, nonce: n, ad: ad, tag: &tag)
                sealed.append((Array(UnsafeRawBufferPointer(start: text, count: 100)), tag))
            }
        }
        func load(_ i: Int) { sealed[i].0.withUnsafeBytes { text.copyMemory(from: $0.baseAddress!, byteCount: 100) } }
        func opened() -> [UInt8] { Array(UnsafeRawBufferPointer(start: text, count: 100)) }
        for (i, n) in nonces.enumerated() {
            load(i)
            try key.openInPlace(text, count: 100, nonce: n, ad: ad, tag: sealed[i].1)
            XCTAssertEqual(opened(), [UInt8](repeating: UInt8(i), count: 100), "message \(i)")
            let sub = try n.span.bytes.withUnsafeBytes { (b) throws(CryptoError) in try AEADNonceMode.extendedSubkey(of: master, nonce: b) }
            let direct = try AEADKey(.aes256gcm, key: sub)
            load(i)
            try direct.openInPlace(text, count: 100, nonce: Array(n[12...]), ad: ad, tag: sealed[i].1)
            XCTAssertEqual(opened(), [UInt8](repeating: UInt8(i), count: 100), "message \(i) under its subkey")
            var otherKeyNonce = n
            otherKeyNonce[0] ^= 1
            load(i)
            var failed = false
            do { try key.openInPlace(text, count: 100, nonce: otherKeyNonce, ad: ad, tag: sealed[i].1) } catch { failed = true }
            XCTAssertTrue(failed, "message \(i) opened under another key nonce")
        }
    }

    /// A version-1 AES-256-GCM file keeps its format when written in place (its 2^32-seal budget, FORMAT.md §7), and
    /// the next whole-file write replaces it with a version-2 file under a new per-file key.
    func testVersion1FileKeepsItsFormatUntilAWholeFileWrite() throws {
        try XCTSkipUnless(AEADCipher.aes256gcm.isAvailable, "AES-256-GCM is not available on this CPU")
        let dir = try temporaryDirectory(self)
        let fixtures = FormatVectorTests.fixtures.appendingPathComponent("v1")
        let keyVectors = try JSONDecoder().decode([FormatVectorTests.Vector].self, from: Data(contentsOf: fixtures.appendingPathComponent("keys.json")))
        let files = ProtectedFiles(keys: InMemoryClassKeys(try keyVectors.map { try FormatVectorTests.classKey($0) }))
        let path = "\(dir)/old.dpf"
        try writeBytes(readBytes(fixtures.appendingPathComponent("aesgcm-complete-40000.dpf").path), path)
        var model = try readBytes(fixtures.appendingPathComponent("aesgcm-complete-40000.plain").path)
        let h = try files.open(path, forWriting: true)
        for i in 0..<10 {
            let piece = [UInt8](repeating: UInt8(i), count: 1000)
            try h.append(piece)
            model += piece
        }
        try h.write([7, 7, 7], at: 100)
        model.replaceSubrange(100..<103, with: [7, 7, 7])
        h.close()
        XCTAssertEqual(try files.info(path).formatVersion, 1)
        XCTAssertEqual(try readBytes(path)[10], 2, "cipher 2: AES-256-GCM with 96-bit nonces")
        XCTAssertEqual(try files.read(path), model)
        try files.write(model, to: path, protection: .complete)
        XCTAssertEqual(try files.info(path).formatVersion, 2)
        XCTAssertEqual(try files.info(path).cipher, .aes256gcm)
        XCTAssertEqual(try readBytes(path)[10], 3, "cipher 3: extended nonces")
        XCTAssertEqual(try files.read(path), model)
    }

    /// A header's version and cipher must agree: 96-bit AES-GCM nonces exist only in version 1, extended ones only
    /// from version 2, and an unknown version is refused as such.
    func testVersionAndCipherMustAgree() throws {
        let base = FileHeader(
            version: 2, protectionClass: .complete, cipher: .aes256gcmExtended, chunkShift: 12, classKeyGeneration: 1,
            fileID: [UInt8](repeating: 1, count: 16), wrappedKey: [UInt8](repeating: 0, count: FileHeader.wrappedKeyLength(for: .complete)))
        XCTAssertEqual(try FileHeader.parse(base.encoded()), base)
        for (version, cipher, code) in [(2, 2, ProtectionError.Code.corruptHeader), (1, 3, .corruptHeader), (3, 3, .unsupportedVersion), (0, 1, .unsupportedVersion)] {
            var bytes = base.encoded()
            bytes[8] = UInt8(version)
            bytes[10] = UInt8(cipher)
            XCTAssertThrowsError(try FileHeader.parse(bytes), "version \(version), cipher \(cipher)") { XCTAssertEqual(($0 as? ProtectionError)?.code, code, "\($0)") }
        }
        for (version, cipher) in [(1, 1), (1, 2), (2, 1)] {
            var bytes = base.encoded()
            bytes[8] = UInt8(version)
            bytes[10] = UInt8(cipher)
            XCTAssertEqual(try FileHeader.parse(bytes).version, UInt8(version))
        }
    }
}
