import Foundation
import KernelKeyring
import TestSupport
import XCTest

/// What a finished dpctl (or other) process left behind.
struct Run {
    var status: Int32
    var stdout: Data
    var stderr: String
    var out: String { String(decoding: stdout, as: UTF8.self) }
}

/// Base class: the real dpctl binary, run in this test's own session keyring, against a throwaway domain.
///
/// setUp joins a new anonymous session keyring on the test thread; the
/// processes it starts inherit it, and `DATAPROTECTION_KEYRING=session` puts
/// the domain's keys there, so nothing reaches `@u` and nothing outlives the test.
class DpctlTestCase: XCTestCase {
    var dir = ""
    var home = ""
    var devices = ""
    var passphraseFile = ""
    var dpctlPath = ""
    var environment: [String: String] = [:]

    override func setUpWithError() throws {
        try super.setUpWithError()
        try Keyring().joinNewSessionKeyring()
        dpctlPath = try builtProduct("dpctl")
        dir = NSTemporaryDirectory() + "dpctl-\(name.filter { $0.isLetter || $0.isNumber })-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        addTeardownBlock { [dir] in try? FileManager.default.removeItem(atPath: dir) }
        home = dir + "/home"
        devices = dir + "/devices"
        passphraseFile = dir + "/passphrase"
        try write("correct horse battery\n", to: passphraseFile)
        // With the sanitizer options and the runtime directory of this process (childEnvironment).
        environment = childEnvironment([
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": dir,
            "DATAPROTECTION_HOME": home, "DATAPROTECTION_DEVICE_DIR": devices, "DATAPROTECTION_KEYRING": "session",
        ])
    }

    /// Runs dpctl with `arguments`, feeding `input` on standard input.
    @discardableResult
    func dpctl(_ arguments: [String], input: Data = Data(), env: [String: String] = [:]) throws -> Run {
        try run(dpctlPath, arguments, input: input, env: env)
    }

    /// Runs dpctl and fails the test unless it exits 0.
    @discardableResult
    func ok(_ arguments: [String], input: Data = Data(), file: StaticString = #filePath, line: UInt = #line) throws -> Run {
        let r = try dpctl(arguments, input: input)
        XCTAssertEqual(r.status, 0, "dpctl \(arguments.joined(separator: " ")): \(r.stderr)", file: file, line: line)
        return r
    }

    /// Runs any executable to completion in the test's environment.
    func run(_ executable: String, _ arguments: [String], input: Data = Data(), env: [String: String] = [:]) throws -> Run {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        p.environment = environment.merging(env) { $1 }
        let i = Pipe(), o = Pipe(), e = Pipe()
        p.standardInput = i
        p.standardOutput = o
        p.standardError = e
        try p.run()
        i.fileHandleForWriting.write(input)
        try i.fileHandleForWriting.close()
        let out = o.fileHandleForReading.readDataToEndOfFile()
        let err = e.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Run(status: p.terminationStatus, stdout: out, stderr: String(decoding: err, as: UTF8.self))
    }

    /// `dpctl init` with the fastest Argon2id; returns the recovery key it printed.
    @discardableResult
    func initDomain() throws -> String {
        let r = try ok(["init", "--passphrase-file", passphraseFile, "--kdf-preset", "minimum"])
        return r.out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func write(_ s: String, to path: String) throws { try Data(s.utf8).write(to: URL(fileURLWithPath: path)) }
    func bytes(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    /// `status --json`, parsed.
    func status() throws -> [String: Any] {
        let r = try ok(["status", "--json"])
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: r.stdout) as? [String: Any])
    }

    /// Whether each class is unlocked, A to D.
    func unlocked() throws -> [Bool] {
        let classes = try XCTUnwrap(try status()["classes"] as? [[String: Any]])
        return classes.map { $0["unlocked"] as? Bool ?? false }
    }

    /// Polls `condition` until it holds or `limit` passes (never a bare sleep).
    func eventually(within limit: Duration, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if try condition() { return true }
            usleep(20_000)
        }
        return false
    }
}
