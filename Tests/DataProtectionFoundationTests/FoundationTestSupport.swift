import DataProtectionFoundation
import DataProtection
import KernelKeyring
import ProtectionCrypto
import XCTest

/// A real domain (own session keyring, fastest Argon2id) and an app context on a fresh container, unlocked.
class FoundationTestCase: XCTestCase {
    var directory = ""
    var domain: ProtectionDomain!
    var context: AppContext!
    /// Whether `setUp` unlocks the new domain (a test of the state before the first unlock says no).
    var unlocksAtSetUp: Bool { true }
    /// Where the domain keeps its class keys: this test's session keyring, or (for async tests, whose threads do not
    /// share setUp's session keyring) the explicit in-process store.
    var keyStore: KeyStore { .kernel(.session) }

    override func setUpWithError() throws {
        try super.setUpWithError()
        // Session keyrings belong to threads; XCTest runs setUp and the test on one thread.
        try Keyring().joinNewSessionKeyring()
        directory = NSTemporaryDirectory() + "dpf-\(name.filter { $0.isLetter || $0.isNumber })-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let location = DomainLocation(home: directory + "/home", deviceDirectory: directory + "/devices")
        domain = try ProtectionDomain.create(at: location, passphrase: try SecretBytes(utf8: "pass"), kdf: .minimumForTests, keyStore: keyStore) { _ in }
        if unlocksAtSetUp { try domain.unlock(passphrase: try SecretBytes(utf8: "pass")) }
        context = try AppContext(domain: domain, containerAt: directory + "/app")
        let (dir, c) = (directory, context!)
        addTeardownBlock { c.container.close(); try? FileManager.default.removeItem(atPath: dir) }
    }

    /// Runs `body` with this test's context current (tests run in parallel processes' threads; never bootstrapped).
    func inContext<R>(_ body: () throws -> R) rethrows -> R { try AppContext.withCurrent(context, body) }

    func url(_ relative: String) -> URL { URL(fileURLWithPath: context.container.root + "/" + relative) }

    /// The raw bytes on disk, read past this module (FileManager's contents(atPath:) is Foundation's).
    func rawBytes(_ relative: String) -> [UInt8] { [UInt8](FileManager.default.contents(atPath: url(relative).path) ?? Data()) }

    /// Asserts that `body` throws a CocoaError with `code` whose underlying ProtectionError has `underlying`.
    func assertCocoa(_ code: CocoaError.Code, _ underlying: ProtectionError.Code, file: StaticString = #filePath, line: UInt = #line, _ body: () throws -> Void) {
        do {
            try body()
            XCTFail("no error; expected \(code)", file: file, line: line)
        } catch let e as CocoaError {
            XCTAssertEqual(e.code, code, "\(e)", file: file, line: line)
            XCTAssertEqual(e.protectionError?.code, underlying, "\(e)", file: file, line: line)
            XCTAssertEqual((e.userInfo[NSUnderlyingErrorKey] as? ProtectionError)?.code, underlying, file: file, line: line)
            XCTAssertFalse(e.localizedDescription.isEmpty, file: file, line: line)
        } catch {
            XCTFail("not a CocoaError: \(error)", file: file, line: line)
        }
    }
}
