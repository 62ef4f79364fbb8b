import Foundation
@testable import DataProtection
import ProtectionCrypto
import XCTest

/// Known-answer vectors for format v1 and frozen v1 files that every future version must read.
///
/// `Fixtures/format-v1-vectors.json` lists, per case, the class key, per-file key,
/// file identifier, wrapped key, chunk nonces, plaintext and the exact file bytes.
/// One test decrypts each expected file with only the class key; another
/// rebuilds the bytes from the inputs with the library's encoder pieces and
/// compares. Set `DP_WRITE_VECTORS=1` to (re)write the fixtures (never in CI:
/// frozen means frozen; a format change adds new files, it does not rewrite these).
final class FormatVectorTests: XCTestCase {
    struct Vector: Codable {
        var name: String
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
        var plaintext: String
        var file: String
    }

    static var fixtures: URL { URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures") }

    func classKey(_ v: Vector) throws -> ClassKey {
        let c = ProtectionClass(rawValue: v.protectionClass)!
        let secret = SharedSecret(try hexBytes(v.classSecret).span.bytes.withUnsafeBytes { (b) throws(CryptoError) in try SecretBytes(copying: b) })
        return ClassKey(c, generation: v.generation, secret: secret, publicKey: try v.classPublic.map { try X25519PublicKey(bytes: hexBytes($0)) })
    }

    /// Builds a v1 file from explicit inputs with the library's own header, key and chunk code.
    func encode(_ v: Vector) throws -> [UInt8] {
        let fileKey = try hexBytes(v.fileKey).span.bytes.withUnsafeBytes { (b) throws(CryptoError) in try SecretBytes(copying: b) }
        let cipher = AEADCipher(rawValue: v.cipher)!
        var header = FileHeader(
            protectionClass: ProtectionClass(rawValue: v.protectionClass)!, cipher: cipher, chunkShift: v.chunkShift,
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
                    sealer.seal(p.baseAddress ?? UnsafeRawPointer(s.baseAddress!), count: len, intoSlot: s.baseAddress!, index: Int64(i), last: i == n - 1)
                }
            }
            out += slot
        }
        return out
    }

    func loadVectors() throws -> [Vector] {
        try JSONDecoder().decode([Vector].self, from: Data(contentsOf: Self.fixtures.appendingPathComponent("format-v1-vectors.json")))
    }

    func testKnownAnswerVectorsDecryptWithOnlyTheClassKey() throws {
        let dir = try temporaryDirectory(self)
        let vectors = try loadVectors()
        XCTAssertGreaterThanOrEqual(vectors.count, 10)
        for v in vectors {
            let files = ProtectedFiles(keys: InMemoryClassKeys([try classKey(v)]))
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

    /// Files written by the real writer (random nonces) at format v1, kept forever.
    func testFrozenV1FilesStillRead() throws {
        let dir = Self.fixtures.appendingPathComponent("v1")
        let keysJSON = try JSONDecoder().decode([Vector].self, from: Data(contentsOf: dir.appendingPathComponent("keys.json")))
        let provider = InMemoryClassKeys(try keysJSON.map { try classKey($0) })
        let files = ProtectedFiles(keys: provider)
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".dpf") }.sorted()
        XCTAssertGreaterThanOrEqual(names.count, 8)
        for name in names {
            let plainURL = dir.appendingPathComponent(name.replacingOccurrences(of: ".dpf", with: ".plain"))
            XCTAssertEqual(try files.read(dir.appendingPathComponent(name).path), [UInt8](try Data(contentsOf: plainURL)), name)
        }
    }

    /// Writes the fixtures; runs only with DP_WRITE_VECTORS=1.
    func testWriteFixtures() throws {
        guard ProcessInfo.processInfo.environment["DP_WRITE_VECTORS"] == "1" else { throw XCTSkip("set DP_WRITE_VECTORS=1 to rewrite the frozen fixtures") }
        var rng = TestRNG(seed: 2026)
        var vectors: [Vector] = []
        var fixtureKeys: [Vector] = []
        for cipher in AEADCipher.allCases {
            for (cls, sizes) in [(ProtectionClass.complete, [0, 1, 100, 4096, 4097]), (.completeUnlessOpen, [5000]), (.completeUntilFirstUserAuthentication, [12_288 + 3]), (.none, [33])] {
                let ck = try ClassKey.generate(cls, generation: UInt32(cipher.rawValue) * 10 + UInt32(cls.rawValue))
                let secretHex = try ck.secret!.secret.withUnsafeBytes { hexString(Array($0)) }
                for n in sizes {
                    let fileKey = rng.bytes(32), fileID = rng.bytes(16)
                    let shift: UInt8 = 12
                    var header = FileHeader(protectionClass: cls, cipher: cipher, chunkShift: shift, classKeyGeneration: ck.generation,
                                            fileID: fileID, wrappedKey: [UInt8](repeating: 0, count: FileHeader.wrappedKeyLength(for: cls)))
                    let fk = try fileKey.span.bytes.withUnsafeBytes { (b) throws(CryptoError) in try SecretBytes(copying: b) }
                    header.wrappedKey = try header.fixedBytes().span.bytes.withUnsafeBytes { (ad) throws(ProtectionError) in try ck.wrap(fk, ad: ad) }
                    let chunks = max(1, (n + 4095) / 4096)
                    var v = Vector(name: "\(cipher == .aes256gcm ? "aesgcm" : "xchacha")-\(cls.name)-\(n)", protectionClass: cls.rawValue, cipher: cipher.rawValue,
                                   chunkShift: shift, generation: ck.generation, classSecret: secretHex, classPublic: ck.publicKey.map { hexString($0.bytes) },
                                   fileKey: hexString(fileKey), fileID: hexString(fileID), wrappedKey: hexString(header.wrappedKey),
                                   nonces: (0..<chunks).map { _ in hexString(rng.bytes(cipher.nonceSize)) }, plaintext: hexString(rng.bytes(n)), file: "")
                    v.file = hexString(try encode(v))
                    vectors.append(v)
                }
                // Frozen files from the real writer, with the real default chunk size.
                let v1 = Self.fixtures.appendingPathComponent("v1")
                try FileManager.default.createDirectory(at: v1, withIntermediateDirectories: true)
                let files = ProtectedFiles(keys: InMemoryClassKeys([ck]), options: .init(cipher: cipher, chunkSize: 16384))
                for n in [0, 40_000] {
                    let base = "\(cipher == .aes256gcm ? "aesgcm" : "xchacha")-\(cls.name)-\(n)"
                    let plain = rng.bytes(n)
                    try files.write(plain, to: v1.appendingPathComponent(base + ".dpf").path, protection: cls)
                    try Data(plain).write(to: v1.appendingPathComponent(base + ".plain"))
                }
                fixtureKeys.append(Vector(name: cls.name, protectionClass: cls.rawValue, cipher: cipher.rawValue, chunkShift: 14, generation: ck.generation,
                                          classSecret: secretHex, classPublic: ck.publicKey.map { hexString($0.bytes) }, fileKey: "", fileID: "", wrappedKey: "", nonces: [], plaintext: "", file: ""))
            }
        }
        let enc = JSONEncoder()
        enc.outputFormatting = [.prettyPrinted, .sortedKeys]
        try enc.encode(vectors).write(to: Self.fixtures.appendingPathComponent("format-v1-vectors.json"))
        try enc.encode(fixtureKeys).write(to: Self.fixtures.appendingPathComponent("v1/keys.json"))
    }
}
