import Foundation
@testable import DataProtection
import ProtectionCrypto
import XCTest

/// Replays the fuzzers' committed corpus and every input that ever crashed them
/// (`Fuzz/Corpus/header`, `Fuzz/Regressions`) through the real reader: each must end
/// in plaintext or a typed `ProtectionError`, never a crash.
final class FuzzRegressionTests: XCTestCase {
    /// The fuzz targets' keys: class c's secret is 32 bytes of value c (see Fuzz/Sources/FuzzSupport).
    func fuzzKeys() throws -> InMemoryClassKeys {
        var keys: [ClassKey] = []
        for c in ProtectionClass.allCases {
            let secret = try [UInt8](repeating: c.rawValue, count: 32).span.bytes.withUnsafeBytes { (b) throws(CryptoError) in try SecretBytes(copying: b) }
            let pk = c.usesPublicKeySealing ? try X25519KeyPair(secretKey: try secret.duplicate()).publicKey : nil
            keys.append(ClassKey(c, generation: 1, secret: SharedSecret(secret), publicKey: pk))
        }
        return InMemoryClassKeys(keys)
    }

    func testCorpusAndRegressionsEndInPlaintextOrTypedErrors() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz")
        let files = ProtectedFiles(keys: try fuzzKeys())
        var replayed = 0, authenticated = 0
        for sub in ["Corpus/header", "Regressions"] {
            let dir = root.appendingPathComponent(sub)
            for name in (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? [] where !name.hasPrefix(".") {
                let path = dir.appendingPathComponent(name).path
                do {
                    _ = try files.read(path)
                    authenticated += 1
                } catch {
                    XCTAssertFalse(error.message.isEmpty)  // typed throws: always a ProtectionError
                }
                replayed += 1
            }
        }
        XCTAssertGreaterThanOrEqual(replayed, 12, "the committed corpus is missing")
        XCTAssertGreaterThanOrEqual(authenticated, 12, "the seed corpus should authenticate under the fuzz keys")
        print("fuzz regressions: \(replayed) inputs replayed, \(authenticated) authenticated, the rest typed errors")
    }
}
