import Foundation
@testable import DataProtection
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
    /// Every seal of a new file, appends included, has a nonce of its own; the chunks of one write call share a key
    /// nonce with distinct GCM halves, and each call draws a new key nonce. Read from the bytes on disk.
    func testEverySealOfANewFileHasItsOwnExtendedNonce() throws {
        try XCTSkipUnless(AEADCipher.aes256gcm.isAvailable, "AES-256-GCM is not available on this CPU")
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(cipher: .aes256gcm, chunkSize: 4096))
        let path = "\(dir)/appended"
        var rng = TestRNG(seed: 19)
        let first = rng.bytes(3 << 20 + 100)  // three 1 MiB batches and a partial chunk, in one call
        let h = try files.create(path, protection: .complete)
        try h.write(first, at: 0)
        let cs = 4096, overhead = 40, slotStride = cs + overhead
        let onDisk = try readBytes(path)
        XCTAssertEqual(onDisk[8], 2, "format version")
        XCTAssertEqual(onDisk[10], 3, "cipher: AES-256-GCM with extended nonces")
        XCTAssertEqual(onDisk.count, 176 + first.count + (first.count / cs + 1) * overhead)
        var seals: [[UInt8]] = []  // every 24-byte nonce sealed, in order
        let chunks = first.count / cs + 1
        for i in 0..<chunks { seals.append(Array(onDisk[(176 + i * slotStride)..<(176 + i * slotStride + 24)])) }
        // One call, batch by batch: each 1 MiB batch (256 chunks) shares one key nonce; batches differ.
        let batchKeyNonces = stride(from: 0, to: chunks, by: 256).map { Array(seals[$0][0..<12]) }
        XCTAssertEqual(Set(batchKeyNonces).count, batchKeyNonces.count)
        for (i, n) in seals.enumerated() { XCTAssertEqual(Array(n[0..<12]), batchKeyNonces[i / 256], "chunk \(i)") }
        // 2,000 appends of 100 bytes: each re-seals the last chunk, under a key nonce of its own.
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
        let appendKeyNonces = seals.suffix(appends).map { Array($0[0..<12]) }
        XCTAssertEqual(Set(appendKeyNonces + batchKeyNonces).count, appends + batchKeyNonces.count, "a key nonce was drawn twice")
        // Distinct key nonces select distinct subkeys of the file's content key.
        let content = try KeyDerivation.subkey(of: files.perFileKeyForTesting(path), context: FileKeys.contentContext, id: 1)
        var subkeys = Set<[UInt8]>()
        for n in appendKeyNonces + batchKeyNonces {
            let sub = try n.span.bytes.withUnsafeBytes { (b) throws(CryptoError) in try AEADNonceMode.extendedSubkey(of: content, nonce: b) }
            subkeys.insert(sub.withUnsafeBytes { Array($0) })
        }
        XCTAssertEqual(subkeys.count, appends + batchKeyNonces.count)
        print("nonce budget: \(seals.count) seals (\(chunks) by one 3 MiB write, \(appends) appends), \(Set(seals).count) distinct nonces, \(subkeys.count) key nonces and subkeys, all distinct")
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
        let key = try AEADKey(.aes256gcm, key: master, nonceMode: .extended)
        XCTAssertEqual(key.nonceSize, 24)
        XCTAssertThrowsError(try { () throws in _ = try AEADKey(.xchacha20poly1305, key: master, nonceMode: .extended) }())
        // Two batches of three nonces, interleaved as a reader meets chunks of several write calls.
        let raw = UnsafeMutableRawBufferPointer.allocate(byteCount: 6 * 24 + 25 + 100, alignment: 16)
        defer { raw.deallocate() }
        try key.fillNonces(raw.baseAddress!, count: 3, stride: 24)
        try key.fillNonces(raw.baseAddress! + 72, count: 3, stride: 24)
        let drawn = (0..<6).map { Array(raw[($0 * 24)..<($0 * 24 + 24)]) }
        let a = Array(drawn[0..<3]), b = Array(drawn[3..<6])
        for k in 1..<3 {  // one key nonce per batch; GCM halves R ⊕ k
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
