import DataProtectionFormat
import Foundation
import DataProtection
import KernelKeyring
import ProtectionCrypto
import XCTest

/// Base class for domain tests: its own session keyring per test (keys go under `@s`), a throwaway home and device directory.
class DomainTestCase: XCTestCase {
    var root = ""
    var location = DomainLocation(home: "", deviceDirectory: "")
    let store = KeyStore.kernel(.session)

    override func setUpWithError() throws {
        try super.setUpWithError()
        // Session keyrings belong to threads; XCTest runs setUp and the test on one thread.
        try Keyring().joinNewSessionKeyring()
        root = try temporaryDirectory(self, name)
        location = DomainLocation(home: root + "/home", deviceDirectory: root + "/devices")
    }

    func secret(_ s: String) throws -> SecretBytes { try SecretBytes(utf8: s) }

    /// A new domain with the fastest Argon2id parameters; returns it and its recovery key text.
    func makeDomain(passphrase: String = "correct horse", at loc: DomainLocation? = nil) throws -> (ProtectionDomain, String) {
        var text = ""
        let d = try ProtectionDomain.create(at: loc ?? location, passphrase: try secret(passphrase), kdf: .minimumForTests, keyStore: store) { (key) throws(ProtectionError) in
            text = (try? key.withText { String(decoding: $0, as: UTF8.self) }) ?? ""
        }
        return (d, text)
    }

    /// Writes `contents` as the keybag the way someone without the device secret can: a zero MAC and a valid checksum.
    @discardableResult
    func writeForgedKeybag(_ contents: KeybagContents) throws -> [UInt8] {
        var bytes = contents.body() + [UInt8](repeating: 0, count: KeybagContents.macSize)
        bytes += try KeybagContents.checksum(bytes[...])
        try writeBytes(bytes, location.keybagPath)
        return bytes
    }

    /// Asserts that `body` fails with `.corruptKeybag` naming the keybag, its message containing `words`.
    func assertKeybagRefused(_ words: String, _ failure: String, file: StaticString = #filePath, line: UInt = #line, _ body: () throws -> Void) {
        do {
            try body()
            XCTFail(failure, file: file, line: line)
        } catch let e as ProtectionError {
            XCTAssertEqual(e.code, .corruptKeybag, e.message, file: file, line: line)
            XCTAssertEqual(e.path, location.keybagPath, file: file, line: line)
            XCTAssertTrue(e.message.contains(words), e.message, file: file, line: line)
        } catch {
            XCTFail("\(error)", file: file, line: line)
        }
    }

    /// Every regular file below `dir`, with its bytes.
    func filesBelow(_ dir: String) throws -> [(String, [UInt8])] {
        var out: [(String, [UInt8])] = []
        let e = FileManager.default.enumerator(atPath: dir)
        while let rel = e?.nextObject() as? String {
            let p = dir + "/" + rel
            var isDir: ObjCBool = false
            if FileManager.default.fileExists(atPath: p, isDirectory: &isDir), !isDir.boolValue { out.append((p, try readBytes(p))) }
        }
        return out
    }
}

extension SecretBytes {
    /// Test-only copy of the secret bytes, to search files for them.
    func exposedForTest() -> [UInt8] { withUnsafeBytes { Array($0) } }
}

/// Whether `needle` occurs in `haystack`.
func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard needle.count <= haystack.count, let first = needle.first else { return false }
    var i = 0
    while i + needle.count <= haystack.count {
        if haystack[i] == first && Array(haystack[i..<(i + needle.count)]) == needle { return true }
        i += 1
    }
    return false
}
