// Shared ground for KernelKeyring tests: a fresh session keyring per test, unique names, child processes.
import Foundation
import KernelKeyring
import XCTest

/// Base class: each test runs in its own new anonymous session keyring and invalidates what it added.
///
/// XCTest on Linux runs setUp, the test and tearDown on one thread, and
/// session keyrings belong to threads, so joining here covers the test body.
class KeyringTestCase: XCTestCase {
    let keyring = Keyring()
    private(set) var session = KeySerial.session
    private var added: [KeySerial] = []

    override func setUpWithError() throws {
        try super.setUpWithError()
        session = try keyring.joinNewSessionKeyring()
        XCTAssertEqual(try keyring.id(of: .session), session, "the test thread did not join its own session keyring")
    }

    override func tearDownWithError() throws {
        for key in added {
            do {
                try keyring.invalidate(key)
            } catch {
                guard [.notFound, .expired, .revoked].contains(error.code) else { throw error }
            }
        }
        added.removeAll()
        try super.tearDownWithError()
    }

    /// A description no other test or test run on this machine uses.
    func uniqueName(_ label: String = #function) -> String {
        let function = label.prefix { $0 != "(" }
        return "kernelkeyring-test:\(function):\(getpid()):\(UUID().uuidString)"
    }

    /// Adds a key with `bytes` as payload and remembers it for tearDown.
    @discardableResult
    func addKey(
        _ bytes: [UInt8], named name: String, type: KeyType = .user, to target: KeySerial? = nil,
        permissions: KeyPermissions = .privateToOwner
    ) throws -> KeySerial {
        let key = try bytes.withUnsafeBytes {
            try keyring.add(type, description: name, payload: $0, to: target ?? session, permissions: permissions)
        }
        added.append(key)
        return key
    }

    /// Remembers a key added another way, for tearDown.
    func track(_ key: KeySerial) { added.append(key) }

    /// The code a failed keyring call threw, or a test failure if it did not throw.
    func code<T>(
        of body: () throws -> T, file: StaticString = #filePath, line: UInt = #line
    ) -> KeyringError.Code? {
        error(of: body, file: file, line: line)?.code
    }

    /// The error a keyring call threw, or a test failure if it did not throw.
    func error<T>(
        of body: () throws -> T, file: StaticString = #filePath, line: UInt = #line
    ) -> KeyringError? {
        do {
            let value = try body()
            XCTFail("expected a KeyringError, got \(value)", file: file, line: line)
            return nil
        } catch let error as KeyringError {
            return error
        } catch {
            XCTFail("expected a KeyringError, got \(error)", file: file, line: line)
            return nil
        }
    }

    /// Polls `body` until it throws, up to `limit`; returns the code it threw, or `nil` if it never did.
    ///
    /// Polling a condition with a deadline, never a bare sleep, is how tests wait for the kernel.
    func firstFailure(within limit: Duration, _ body: () throws -> Void) -> KeyringError.Code? {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            do {
                try body()
                usleep(5_000)
            } catch let error as KeyringError {
                return error.code
            } catch {
                XCTFail("expected a KeyringError, got \(error)")
                return nil
            }
        }
        return nil
    }

    /// Polls `condition` until it holds, up to `limit`; returns whether it did.
    func eventually(within limit: Duration, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if try condition() { return true }
            usleep(5_000)
        }
        return false
    }

    /// Test payload bytes (not a secret).
    func randomPayload(_ count: Int = 32) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255) }
    }
}

/// What a finished child process left behind.
struct ChildResult {
    var status: Int32
    var stdout: Data
    var stderr: String
    var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
}

/// Runs `executable` with `arguments` to completion and collects its output.
func runChild(_ executable: String, _ arguments: [String]) throws -> ChildResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    let stderr = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return ChildResult(
        status: process.terminationStatus, stdout: stdout,
        stderr: String(decoding: stderr, as: UTF8.self))
}
