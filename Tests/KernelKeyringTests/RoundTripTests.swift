// Adding, finding, reading and describing keys against the real kernel keyring.
import Foundation
import KernelKeyring
import Logging
import XCTest

final class RoundTripTests: KeyringTestCase {
    func testAddSearchReadRoundTrip() throws {
        let name = uniqueName()
        let payload = randomPayload()
        let key = try addKey(payload, named: name)

        XCTAssertEqual(try keyring.search(.session, type: .user, description: name), key)
        var back = [UInt8](repeating: 0, count: 64)
        let length = try back.withUnsafeMutableBytes { try keyring.read(key, into: $0) }
        XCTAssertEqual(length, payload.count)
        XCTAssertEqual(Array(back.prefix(length)), payload)
        XCTAssertEqual(try keyring.payloadLength(of: key), payload.count)
    }

    func testAddingTheSameNameAgainUpdatesThePayload() throws {
        let name = uniqueName()
        let first = try addKey(randomPayload(), named: name)
        let newer = randomPayload(16)
        let second = try addKey(newer, named: name)
        XCTAssertEqual(first, second, "add_key of an existing user key updates it in place")
        var back = [UInt8](repeating: 0, count: 32)
        let length = try back.withUnsafeMutableBytes { try keyring.read(second, into: $0) }
        XCTAssertEqual(Array(back.prefix(length)), newer)
    }

    func testReadIntoTooSmallBufferThrowsRequiredLengthAndLeavesNoBytes() throws {
        let payload = randomPayload(32)
        let key = try addKey(payload, named: uniqueName())
        var small = [UInt8](repeating: 0xAA, count: 16)
        let failure = error {
            try small.withUnsafeMutableBytes { try keyring.read(key, into: $0) }
        }
        XCTAssertEqual(failure?.code, .bufferTooSmall(required: 32))
        XCTAssertEqual(small, [UInt8](repeating: 0, count: 16), "a too-small buffer is zeroed, never left with part of the payload")
        XCTAssertTrue(failure?.message.contains("at least 32 bytes") ?? false, failure?.message ?? "")

        let empty = code {
            try keyring.read(key, into: UnsafeMutableRawBufferPointer(start: nil, count: 0))
        }
        XCTAssertEqual(empty, .bufferTooSmall(required: 32))
    }

    func testReadOfUnknownLengthAsksForABufferOfThePayloadsLength() throws {
        let payload = randomPayload(100)
        let key = try addKey(payload, named: uniqueName())
        var storage: [UInt8] = []
        var requests: [Int] = []
        let length = try keyring.read(key) { needed in
            requests.append(needed)
            storage = [UInt8](repeating: 0, count: needed)
            return storage.withUnsafeMutableBytes { $0 }  // storage outlives the call
        }
        XCTAssertEqual(requests, [100])
        XCTAssertEqual(length, 100)
        XCTAssertEqual(storage, payload)
    }

    func testDescribeReportsTypeOwnerPermissionsAndName() throws {
        let name = uniqueName()
        let key = try addKey(randomPayload(), named: name)
        let attributes = try keyring.describe(key)
        XCTAssertEqual(attributes.type, .user)
        XCTAssertEqual(attributes.uid, getuid())
        XCTAssertEqual(attributes.gid, getgid())
        XCTAssertEqual(attributes.permissions, .privateToOwner)
        XCTAssertEqual(attributes.description, name)
    }

    func testNamedKeyringIsCreatedOnceAndFoundAfterwards() throws {
        let name = uniqueName()
        let created = try keyring.keyring(named: name, in: session, permissions: .privateToOwner)
        track(created)
        let found = try keyring.keyring(named: name, in: session, permissions: .privateToOwner)
        XCTAssertEqual(created, found, "a second call must find the keyring, not displace it")
        XCTAssertEqual(try keyring.describe(created).type, .keyring)
        XCTAssertEqual(try keyring.describe(created).permissions, .privateToOwner)
        XCTAssertEqual(try keyring.children(of: session), [created])

        let inside = try addKey(randomPayload(), named: uniqueName(), to: created)
        XCTAssertEqual(try keyring.children(of: created), [inside])
        XCTAssertEqual(try keyring.search(session, type: .user, description: try keyring.describe(inside).description), inside)
    }

    func testChildrenListsManyKeysPastTheFirstBuffer() throws {
        let ring = try keyring.keyring(named: uniqueName(), in: session, permissions: .privateToOwner)
        track(ring)
        var keys: [KeySerial] = []
        for index in 0..<100 {
            keys.append(try addKey([UInt8(index)], named: uniqueName("many\(index)"), to: ring))
        }
        XCTAssertEqual(Set(try keyring.children(of: ring)), Set(keys))
    }

    func testSpecialKeyringsResolve() throws {
        XCTAssertEqual(try keyring.id(of: .session), session)
        XCTAssertGreaterThan(try keyring.id(of: .user, create: true).rawValue, 0)
        XCTAssertGreaterThan(try keyring.id(of: .process, create: true).rawValue, 0)
        XCTAssertEqual(KeySerial.userSession.description, "@us")
        let persistent = try keyring.persistentKeyring(linkInto: session)
        XCTAssertEqual(try keyring.describe(persistent).type, .keyring)
        XCTAssertTrue(try keyring.children(of: session).contains(persistent))
        try keyring.unlink(persistent, from: session)
    }

    /// The trap joinNewSessionKeyring documents: the session keyring belongs to the thread.
    func testJoiningASessionKeyringAffectsOnlyTheCallingThread() throws {
        let done = DispatchSemaphore(value: 0)
        let seen = LockedBox<(inherited: KeySerial?, joined: KeySerial?)>((nil, nil))
        let thread = Thread { [keyring] in
            let inherited = try? keyring.id(of: .session)
            let joined = try? keyring.joinNewSessionKeyring()
            seen.value = (inherited, joined)
            done.signal()
        }
        thread.start()
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(seen.value.inherited, session, "a thread started after the join inherits the session")
        XCTAssertNotNil(seen.value.joined)
        XCTAssertNotEqual(seen.value.joined, session)
        XCTAssertEqual(try keyring.id(of: .session), session, "another thread's join must not move this thread")
    }

    func testCallsAreLoggedWithPayloadRedacted() throws {
        let recorder = LogRecorder()
        var logger = Logger(label: "test", factory: { _ in recorder })
        logger.logLevel = .trace
        let logged = Keyring(logger: logger)
        let payload: [UInt8] = Array("not-for-logs-0123456789".utf8)
        let name = uniqueName()
        let key = try payload.withUnsafeBytes {
            try logged.add(.user, description: name, payload: $0, to: session, permissions: .privateToOwner)
        }
        track(key)
        var back = [UInt8](repeating: 0, count: 64)
        _ = try back.withUnsafeMutableBytes { try logged.read(key, into: $0) }

        let lines = recorder.lines
        XCTAssertTrue(lines.contains { $0.hasPrefix("debug add_key(\"user\", \"\(name)\", <data>, 23, \(session)) = \(key)") }, "\(lines)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("trace keyctl_read(\(key), <data>, 64) = 23") }, "\(lines)")
        XCTAssertFalse(lines.contains { $0.contains("not-for-logs") }, "payload bytes leaked into the log: \(lines)")
    }
}

/// A value shared between threads under a lock.
final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

/// A LogHandler that keeps `level message` lines for assertions.
final class LogRecorder: LogHandler, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    var lines: [String] { lock.withLock { stored } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        lock.withLock { stored.append("\(event.level) \(event.message)") }
    }
}
