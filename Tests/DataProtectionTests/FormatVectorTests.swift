import DataProtectionFormat
import Foundation
import DataProtection
// @testable: checks the format vectors against the internal sealer and file-key derivation (header and chunk layout are DataProtectionFormat's public API).
@testable import DataProtectionFiles
// @testable: wraps the vectors' per-file keys with a class key's internal secret bytes.
@testable import DataProtectionKeys
import ProtectionCrypto
import XCTest

/// Known-answer vectors and frozen files for every format version, which every later version must read.
///
/// `Fixtures/format-v<N>-vectors.json` lists, per case, the class key, per-file key,
/// file identifier, wrapped key, chunk nonces, plaintext and the exact file bytes
/// (version 2 adds, for AES-256-GCM with extended nonces, each chunk's subkey).
/// One test decrypts each expected file with only the class key; another
/// rebuilds the bytes from the inputs with the library's encoder pieces and
/// compares. Set `DP_WRITE_VECTORS=1` to write the fixtures of the current
/// version (never in CI: frozen means frozen; a format change adds new files, it
/// does not rewrite old ones — the version-1 fixtures were written by the
/// version-1 generator, in this file's history).
final class FormatVectorTests: XCTestCase {
    struct Vector: Codable {
        var name: String
        var version: UInt8?  // absent in version 1's file
        var protectionClass: UInt8
        var cipher: UInt8
        var chunkShift: UInt8
        var generation: UInt32
        var classSecret: String  // symmetric key (A, C, D) or X25519 private key (B)
        var classPublic: String?  // B only
        var fileKey: String
        var fileID: String
        var wrappedKey: String
        var nonces: [String]
        var chunkKeys: [String]?  // cipher 3: the subkey each chunk's key nonce selects
        var plaintext: String
        var file: String
    }

    static var fixtures: URL { URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures") }
    static let versions: [UInt8] = [1, 2]

    static func classKey(_ v: Vector) throws -> ClassKey {
        let c = ProtectionClass(rawValue: v.protectionClass)!
        let secret = SharedSecret(try hexBytes(v.classSecret).span.bytes.withUnsafeBytes { (b) throws(CryptoError) in try SecretBytes(copying: b) })
        return ClassKey(c, generation: v.generation, secret: secret, publicKey: try v.classPublic.map { try X25519PublicKey(bytes: hexBytes($0)) })
    }

    static func secret(_ bytes: [UInt8]) throws -> SecretBytes {
        try bytes.span.bytes.withUnsafeBytes { (b) throws(CryptoError) in try SecretBytes(copying: b) }
    }

    /// The subkey chunk nonce `nonce` selects under the content key of `fileKey` (cipher 3, FORMAT.md §3.3).
    static func chunkKey(fileKey: [UInt8], nonce: [UInt8]) throws -> [UInt8] {
        let content = try KeyDerivation.subkey(of: secret(fileKey), context: FileKeys.contentContext, id: 1)
        let sub = try nonce.span.bytes.withUnsafeBytes { (n) throws(CryptoError) in try AEADNonceMode.extendedSubkey(of: content, nonce: n) }
        return sub.withUnsafeBytes { Array($0) }
    }

    /// Builds a file from explicit inputs with the library's own header, key and chunk code.
    func encode(_ v: Vector) throws -> [UInt8] {
        let fileKey = try Self.secret(hexBytes(v.fileKey))
        let cipher = ChunkCipher(rawValue: v.cipher)!
        var header = FileHeader(
            version: v.version ?? 1, protectionClass: ProtectionClass(rawValue: v.protectionClass)!, cipher: cipher, chunkShift: v.chunkShift,
            classKeyGeneration: v.generation, fileID: hexBytes(v.fileID), wrappedKey: hexBytes(v.wrappedKey))
        let keys = try FileKeys(fileKey: fileKey, cipher: cipher)
        header.mac = try keys.headerMAC(header)
        let sealer = ChunkSealer(fileID: header.fileID, keys: keys)
        let plain = hexBytes(v.plaintext)
        let layout = ChunkLayout(headerSize: FileHeader.size, chunkSize: header.chunkSize, overhead: cipher.overhead)
        let n = Int(layout.chunkCount(forPlaintextSize: Int64(plain.count)))
        XCTAssertEqual(v.nonces.count, n)
        var out = header.encoded()
        for i in 0..<n {
            let len = layout.plaintextLength(ofChunk: Int64(i), plaintextSize: Int64(plain.count))
            var slot = hexBytes(v.nonces[i]) + [UInt8](repeating: 0, count: len + 16)
            let chunkPlain = Array(plain[(i * header.chunkSize)..<(i * header.chunkSize + len)])
            slot.withUnsafeMutableBytes { s in
                chunkPlain.withUnsafeBytes { p in
                    sealer.withSession {
                        sealer.seal(p.baseAddress ?? UnsafeRawPointer(s.baseAddress!), count: len, intoSlot: s.baseAddress!, index: Int64(i), last: i == n - 1, in: &$0)
                    }
                }
            }
            out += slot
        }
        return out
    }

    func loadVectors(version: UInt8) throws -> [Vector] {
        try JSONDecoder().decode([Vector].self, from: Data(contentsOf: Self.fixtures.appendingPathComponent("format-v\(version)-vectors.json")))
    }

    func loadVectors() throws -> [Vector] { try Self.versions.flatMap { try loadVectors(version: $0) } }

    func testKnownAnswerVectorsDecryptWithOnlyTheClassKey() throws {
        let dir = try temporaryDirectory(self)
        let vectors = try loadVectors()
        XCTAssertGreaterThanOrEqual(vectors.count, 10)
        for v in vectors {
            let files = ProtectedFiles(keys: InMemoryClassKeys([try Self.classKey(v)]))
            let path = "\(dir)/\(v.name)"
            try writeBytes(hexBytes(v.file), path)
            XCTAssertEqual(try files.read(path), hexBytes(v.plaintext), v.name)
        }
    }

    func testKnownAnswerVectorsRegenerateByteForByte() throws {
        for v in try loadVectors() {
            XCTAssertEqual(hexString(try encode(v)), v.file, "\(v.name): the encoder no longer produces the frozen bytes")
        }
    }

    /// Version 2's AES-256-GCM chunks are plain AES-256-GCM under the subkey of their key nonce, with the nonce's
    /// second half as the GCM nonce: checked with the direct cipher, not the library's session code.
    func testExtendedNonceChunksAreAESGCMUnderTheirSubkey() throws {
        try XCTSkipUnless(AEADCipher.aes256gcm.isAvailable, "AES-256-GCM is not available on this CPU")
        var chunks = 0
        for v in try loadVectors(version: 2) where v.cipher == ChunkCipher.aes256gcmExtended.rawValue {
            let file = hexBytes(v.file), plain = hexBytes(v.plaintext), cs = 1 << Int(v.chunkShift)
            XCTAssertEqual(v.chunkKeys?.count, v.nonces.count, v.name)
            for (i, nonceHex) in v.nonces.enumerated() {
                let nonce = hexBytes(nonceHex)
                let sub = try Self.chunkKey(fileKey: hexBytes(v.fileKey), nonce: nonce)
                XCTAssertEqual(hexString(sub), v.chunkKeys?[i], "\(v.name) chunk \(i): subkey")
                let aead = try AEADKey(.aes256gcm, key: Self.secret(sub))
                let len = min(cs, plain.count - i * cs), at = FileHeader.size + i * (cs + 40)
                XCTAssertEqual(Array(file[at..<(at + 24)]), nonce)
                var body = Array(file[(at + 24)..<(at + 24 + len)])
                let tag = Array(file[(at + 24 + len)..<(at + 40 + len)])
                let ad = hexBytes(v.fileID) + withUnsafeBytes(of: UInt64(i).bigEndian, Array.init) + [i == v.nonces.count - 1 ? 1 : 0]
                try body.withUnsafeMutableBytes { b in
                    try ad.withUnsafeBytes { a in
                        try aead.openInPlace(b.baseAddress ?? UnsafeMutableRawPointer(mutating: a.baseAddress!), count: len, nonce: Array(nonce[12...]), ad: a, tag: tag)
                    }
                }
                XCTAssertEqual(body, Array(plain[(i * cs)..<(i * cs + len)]), "\(v.name) chunk \(i)")
                chunks += 1
            }
        }
        XCTAssertGreaterThanOrEqual(chunks, 10)
    }

    /// Files written by the real writer (random nonces) at each format version, kept forever.
    func testFrozenFilesStillRead() throws {
        for version in Self.versions {
            let dir = Self.fixtures.appendingPathComponent("v\(version)")
            let keysJSON = try JSONDecoder().decode([Vector].self, from: Data(contentsOf: dir.appendingPathComponent("keys.json")))
            let provider = InMemoryClassKeys(try keysJSON.map { try Self.classKey($0) })
            let files = ProtectedFiles(keys: provider)
            let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".dpf") }.sorted()
            XCTAssertGreaterThanOrEqual(names.count, 8)
            for name in names {
                let path = dir.appendingPathComponent(name).path
                XCTAssertEqual(try files.info(path).formatVersion, version, name)
                let plainURL = dir.appendingPathComponent(name.replacingOccurrences(of: ".dpf", with: ".plain"))
                XCTAssertEqual(try files.read(path), [UInt8](try Data(contentsOf: plainURL)), name)
            }
        }
    }

    /// Writes the current version's fixtures; runs only with DP_WRITE_VECTORS=1.
    ///
    /// AES-256-GCM vectors share a key nonce between pairs of chunks (as one write call's chunks do) and change it
    /// between pairs, so a reader's subkey reuse and its switch are both covered; each key nonce's GCM nonces are
    /// `R ⊕ k`, the writer's rule.
    func testWriteFixtures() throws {
        guard ProcessInfo.processInfo.environment["DP_WRITE_VECTORS"] == "1" else { throw XCTSkip("set DP_WRITE_VECTORS=1 to write the current version's fixtures") }
        let version = FileHeader.currentVersion
        let out = Self.fixtures.appendingPathComponent("v\(version)")
        guard !FileManager.default.fileExists(atPath: out.path) else { throw XCTSkip("\(out.path) exists: frozen fixtures are never rewritten") }
        var rng = TestRNG(seed: 2026_11_24)
        var vectors: [Vector] = []
        var fixtureKeys: [Vector] = []
        func label(_ c: ChunkCipher) -> String { c == .xchacha20poly1305 ? "xchacha" : "aesgcmx" }
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        for cipher in ChunkCipher.allCases where cipher.isAllowed(inVersion: version) {
            for (cls, sizes) in [(ProtectionClass.complete, [0, 1, 100, 4096, 4097]), (.completeUnlessOpen, [5000]), (.completeUntilFirstUserAuthentication, [12_288 + 3]), (.none, [33])] {
                let ck = try ClassKey.generate(cls, generation: UInt32(cipher.rawValue) * 10 + UInt32(cls.rawValue))
                let secretHex = try ck.secret!.secret.withUnsafeBytes { hexString(Array($0)) }
                for n in sizes {
                    let fileKey = rng.bytes(32), fileID = rng.bytes(16)
                    let shift: UInt8 = 12
                    var header = FileHeader(version: version, protectionClass: cls, cipher: cipher, chunkShift: shift, classKeyGeneration: ck.generation,
                                            fileID: fileID, wrappedKey: [UInt8](repeating: 0, count: FileHeader.wrappedKeyLength(for: cls)))
                    let fk = try Self.secret(fileKey)
                    header.wrappedKey = try header.fixedBytes().span.bytes.withUnsafeBytes { (ad) throws(ProtectionError) in try ck.wrap(fk, ad: ad) }
                    let chunks = max(1, (n + 4095) / 4096)
                    var nonces: [[UInt8]] = []
                    if cipher.nonceMode == .extended {
                        var keyNonce: [UInt8] = [], r: [UInt8] = []
                        for i in 0..<chunks {
                            if i % 2 == 0 { keyNonce = rng.bytes(12); r = rng.bytes(12) }
                            var n2 = r
                            n2[11] ^= UInt8(i % 2)
                            nonces.append(keyNonce + n2)
                        }
                    } else {
                        nonces = (0..<chunks).map { _ in rng.bytes(cipher.nonceSize) }
                    }
                    var v = Vector(name: "\(label(cipher))-\(cls.name)-\(n)", version: version, protectionClass: cls.rawValue, cipher: cipher.rawValue,
                                   chunkShift: shift, generation: ck.generation, classSecret: secretHex, classPublic: ck.publicKey.map { hexString($0.bytes) },
                                   fileKey: hexString(fileKey), fileID: hexString(fileID), wrappedKey: hexString(header.wrappedKey),
                                   nonces: nonces.map(hexString),
                                   chunkKeys: cipher.nonceMode == .extended ? try nonces.map { hexString(try Self.chunkKey(fileKey: fileKey, nonce: $0)) } : nil,
                                   plaintext: hexString(rng.bytes(n)), file: "")
                    v.file = hexString(try encode(v))
                    vectors.append(v)
                }
                // Frozen files from the real writer, with the default chunk size: one whole write each, and one built by
                // three appends (chunks sealed under several key nonces).
                let files = ProtectedFiles(keys: InMemoryClassKeys([ck]), options: .init(cipher: cipher.algorithm))
                for n in [0, 40_000] {
                    let base = "\(label(cipher))-\(cls.name)-\(n)"
                    let plain = rng.bytes(n)
                    try files.write(plain, to: out.appendingPathComponent(base + ".dpf").path, protection: cls)
                    try Data(plain).write(to: out.appendingPathComponent(base + ".plain"))
                }
                let base = "\(label(cipher))-\(cls.name)-appended"
                let plain = rng.bytes(20_000)
                let h = try files.create(out.appendingPathComponent(base + ".dpf").path, protection: cls)
                for (a, b) in [(0, 5_000), (5_000, 5_001), (5_001, 20_000)] { try h.append(Array(plain[a..<b])) }
                try h.sync()
                h.close()
                try Data(plain).write(to: out.appendingPathComponent(base + ".plain"))
                fixtureKeys.append(Vector(name: cls.name, version: version, protectionClass: cls.rawValue, cipher: cipher.rawValue, chunkShift: 12, generation: ck.generation,
                                          classSecret: secretHex, classPublic: ck.publicKey.map { hexString($0.bytes) }, fileKey: "", fileID: "", wrappedKey: "",
                                          nonces: [], plaintext: "", file: ""))
            }
        }
        let enc = JSONEncoder()
        enc.outputFormatting = [.prettyPrinted, .sortedKeys]
        try enc.encode(vectors).write(to: Self.fixtures.appendingPathComponent("format-v\(version)-vectors.json"))
        try enc.encode(fixtureKeys).write(to: out.appendingPathComponent("keys.json"))
    }
}
