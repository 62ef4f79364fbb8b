import DataProtection
import DataProtectionFormat
import ProtectionCrypto
import Foundation
import XCTest

/// A new file's random parts (FORMAT.md §3.1, §6.1) come from one CSPRNG call (`ProtectedFiles.newFileRandomBytes`):
/// the file key, the file identifier and the first key nonce are still each fresh per file and never reused.
final class NewFileRandomTests: XCTestCase {
    func testEveryNewFileHasItsOwnFileIdentifierAndKeyNonce() throws {
        let dir = try temporaryDirectory(self)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random())
        var ids = Set<[UInt8]>(), keyNonces = Set<[UInt8]>()
        for i in 0..<64 {
            let h = try files.create("\(dir)/\(i)", protection: .complete)
            try h.write(Array(repeating: UInt8(i), count: 100), at: 0)
            h.close()
            let raw = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(dir)/\(i)")))
            let header = try FileHeader.parse(raw)
            XCTAssertEqual(header.cipher.nonceMode, .extended, "this test reads extended nonces")
            // Chunk 0's nonce: the key nonce N1 and R (R's last four bytes carry the seal number).
            let nonce = Array(raw[FileHeader.size..<FileHeader.size + 20])
            XCTAssertNotEqual(header.fileID, [UInt8](repeating: 0, count: 16), "file \(i): the file identifier was never drawn")
            XCTAssertFalse(contains(nonce, header.fileID) || contains(header.fileID, Array(nonce[0..<16])), "file \(i): the identifier and the key nonce share bytes")
            ids.insert(header.fileID)
            keyNonces.insert(nonce)
        }
        XCTAssertEqual(ids.count, 64, "a file identifier repeated")
        XCTAssertEqual(keyNonces.count, 64, "a first key nonce repeated")
    }
}
