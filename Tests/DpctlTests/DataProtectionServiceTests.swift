import Foundation
import DataProtection
import DataProtectionService
import Logging
import ProtectionCrypto
import InMemoryLogging
import ServiceLifecycle
import XCTest

/// A trace-level logger whose lines `handler.entries` keeps (swift-log's in-memory handler).
private func capturingLogger() -> (Logger, InMemoryLogHandler) {
    var handler = InMemoryLogHandler()
    handler.logLevel = .trace
    return (Logger(label: "service-test") { _ in handler }, handler)
}

/// The `domain` metadata of each line of `handler` whose message is `message`.
private func domains(_ handler: InMemoryLogHandler, _ message: String) -> [String?] {
    handler.entries.filter { "\($0.message)" == message }.map { $0.metadata["domain"].map { "\($0)" } }
}

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
        let service = DataProtectionService(domain: domain)
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

    /// One logger per domain: the service logs through the domain's logger, with its `domain` metadata, as the domain's
    /// own unlock line does; the deprecated `init(domain:logger:)` still logs through the domain's logger when the
    /// domain has one (the logger it is given is then unused), and through the given one when the domain has none.
    @available(*, deprecated, message: "exercises the deprecated init(domain:logger:)")
    func testTheServiceLogsThroughTheDomainsLogger() async throws {
        let location = DomainLocation(home: home, deviceDirectory: devices)
        let (domainLogger, domainLog) = capturingLogger(), (givenLogger, givenLog) = capturingLogger()
        let domain = try ProtectionDomain.create(
            at: location, passphrase: try SecretBytes(utf8: "pw"), kdf: .minimumForTests, keyStore: .inProcess,
            logger: domainLogger) { (_) throws(ProtectionError) in }
        try domain.unlock(passphrase: try SecretBytes(utf8: "pw"))
        /// Runs `service` in a group until its `running` line reaches `log`, then shuts the group down gracefully.
        func runAndShutDown(_ service: DataProtectionService, _ log: InMemoryLogHandler) async throws {
            let group = ServiceGroup(configuration: .init(services: [.init(service: service)], logger: Logger(label: "group")))
            let before = domains(log, "data protection service running").count
            let running = Task { try await group.run() }
            let deadline = ContinuousClock.now.advanced(by: .seconds(10))
            while domains(log, "data protection service running").count == before && ContinuousClock.now < deadline { await Task.yield() }
            await group.triggerGracefulShutdown()
            try await running.value
        }
        try await runAndShutDown(DataProtectionService(domain: domain), domainLog)
        let id = "\(domain.id)"
        XCTAssertEqual(domains(domainLog, "unlocked domain"), [id])
        XCTAssertEqual(domains(domainLog, "data protection service shut down"), [id], "the service's shutdown line goes to the domain's logger, with its domain")
        XCTAssertEqual(domains(domainLog, "data protection service running"), [id])
        let lines = domainLog.entries.count

        // The deprecated form, on a domain with a logger: still the domain's.
        let again = try ProtectionDomain.open(at: location, keyStore: .inProcess, logger: domainLogger)
        try await runAndShutDown(DataProtectionService(domain: again, logger: givenLogger), domainLog)
        XCTAssertEqual(domains(domainLog, "data protection service shut down"), [id, id])
        XCTAssertTrue(givenLog.entries.isEmpty, "a second logger for the domain was used")
        // On a domain without one: the given logger, with the domain's id as metadata.
        let bare = try ProtectionDomain.open(at: location, keyStore: .inProcess)
        try await runAndShutDown(DataProtectionService(domain: bare, logger: givenLogger), givenLog)
        XCTAssertEqual(domains(givenLog, "data protection service shut down"), [id])
        print("service and domain log lines through the one domain logger: \(lines) (unlock, running, shut down with domain=\(id))")
    }
}
