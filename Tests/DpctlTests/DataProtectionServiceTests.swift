import Foundation
import DataProtection
import DataProtectionService
import Logging
import ProtectionCrypto
import ServiceLifecycle
import XCTest

/// DataProtectionService in a ServiceGroup of this process: graceful shutdown refuses new work with `.shuttingDown`,
/// closes the containers it opened and keeps what was written.
final class DataProtectionServiceTests: DpctlTestCase {
    func testGracefulShutdownRefusesNewWorkAndKeepsWhatWasWritten() async throws {
        // The explicit in-process key store: this async test runs on threads that do not share setUp's session keyring.
        let location = DomainLocation(home: home, deviceDirectory: devices)
        let domain = try ProtectionDomain.create(
            at: location, passphrase: try SecretBytes(utf8: "pw"), kdf: .minimumForTests, keyStore: .inProcess) { (_) throws(ProtectionError) in }
        try domain.unlock(passphrase: try SecretBytes(utf8: "pw"))
        try Container.create(at: dir + "/app", keys: domain.keys).close()
        let service = DataProtectionService(domain: domain, logger: Logger(label: "test"))
        let group = ServiceGroup(configuration: .init(services: [.init(service: service)], logger: Logger(label: "test")))
        let running = Task { try await group.run() }

        let container = try service.openContainer(at: dir + "/app")
        try await container.nonblocking.write(Array("kept".utf8), to: "Documents/a.txt")
        let handle = try await container.nonblocking.create("Documents/b.txt")
        try await handle.nonblocking.write(Array("journaled".utf8), at: 0)
        try await handle.nonblocking.sync()
        try await handle.nonblocking.append(Array(" and committed by the shutdown".utf8))

        await group.triggerGracefulShutdown()
        try await running.value
        XCTAssertEqual(domain.liveLock.openHandleCount, 1, "the handle stays registered until its owner closes it")
        for (what, call) in [
            ("container write", { try container.write(Array("late".utf8), to: "Documents/c.txt") }),
            ("open a container", { _ = try service.openContainer(at: self.dir + "/app") }),
            ("handle write", { try handle.write([1], at: 0) }),
        ] as [(String, () throws -> Void)] {
            XCTAssertThrowsError(try call(), what) { XCTAssertEqual(($0 as? ProtectionError)?.code, .shuttingDown, "\(what): \($0)") }
        }
        handle.close()
        XCTAssertEqual(domain.liveLock.openHandleCount, 0)

        // Another instance of the domain (as a restarted service would) reads everything written before the shutdown.
        let again = try ProtectionDomain.open(at: location, keyStore: .inProcess)
        try again.unlock(passphrase: try SecretBytes(utf8: "pw"))
        let reopened = try Container(at: dir + "/app", keys: again.keys)
        defer { reopened.close() }
        XCTAssertEqual(try reopened.read("Documents/a.txt"), Array("kept".utf8))
        XCTAssertEqual(try reopened.read("Documents/b.txt"), Array("journaled and committed by the shutdown".utf8))
        XCTAssertThrowsError(try reopened.read("Documents/c.txt"))
    }
}
