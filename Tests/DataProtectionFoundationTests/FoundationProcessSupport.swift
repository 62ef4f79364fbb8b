// Other processes for the Foundation layer's tests: the real dpctl (lock, unlock) and rigs, on this test's domain.
import DataProtectionFoundation
import Foundation
import TestSupport
import XCTest

/// What a finished process printed and returned.
struct ProcessResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

extension FoundationTestCase {
    /// The environment that points dpctl and the rigs at this test's domain, in this test's session keyring.
    var domainEnvironment: [String: String] {
        childEnvironment([
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": directory,
            "DATAPROTECTION_HOME": directory + "/home", "DATAPROTECTION_DEVICE_DIR": directory + "/devices", "DATAPROTECTION_KEYRING": "session",
        ])
    }

    /// Runs the built product `name` (dpctl, a rig) to completion with `arguments`.
    /// - Parameter overrides: variables set over `domainEnvironment` (another `XDG_RUNTIME_DIR`, say).
    @discardableResult
    func runProduct(_ name: String, _ arguments: [String], overrides: [String: String] = [:]) throws -> ProcessResult {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try builtProduct(name))
        p.arguments = arguments
        p.environment = domainEnvironment.merging(overrides) { $1 }
        let o = Pipe(), e = Pipe()
        p.standardOutput = o
        p.standardError = e
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let out = o.fileHandleForReading.readDataToEndOfFile(), err = e.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return ProcessResult(status: p.terminationStatus, stdout: String(decoding: out, as: UTF8.self), stderr: String(decoding: err, as: UTF8.self))
    }

    /// Starts the built product `name`; it runs until `finish` closes its standard input.
    func startProduct(_ name: String, _ arguments: [String]) throws -> RunningProduct {
        let s = try TestSupport.startProduct(name, arguments, environment: domainEnvironment, captureError: true)
        return RunningProduct(process: s.process, input: s.input, output: s.output, error: s.error!)
    }

    /// Runs dpctl and fails the test unless it exits 0.
    @discardableResult
    func dpctl(_ arguments: [String], overrides: [String: String] = [:], file: StaticString = #filePath, line: UInt = #line) throws -> ProcessResult {
        let r = try runProduct("dpctl", arguments, overrides: overrides)
        XCTAssertEqual(r.status, 0, "dpctl \(arguments.joined(separator: " ")): \(r.stderr)", file: file, line: line)
        return r
    }

    /// `dpctl unlock` with this test's passphrase.
    func dpctlUnlock(overrides: [String: String] = [:], file: StaticString = #filePath, line: UInt = #line) throws {
        let passphrase = directory + "/passphrase"
        // Foundation's own FileManager: `Data.write(to:)` in a file that imports this module writes into the container.
        XCTAssertTrue(FileManager.default.createFile(atPath: passphrase, contents: Data("pass\n".utf8)), file: file, line: line)
        try dpctl(["unlock", "--passphrase-file", passphrase], overrides: overrides, file: file, line: line)
    }
}

/// A product started by `startProduct`.
struct RunningProduct {
    let process: Process
    let input: Pipe, output: Pipe, error: Pipe

    /// The first line it prints (blocks until it does, or exits).
    func firstLine() -> String {
        var line = Data()
        while let b = try? output.fileHandleForReading.read(upToCount: 1), let c = b.first, c != UInt8(ascii: "\n") { line.append(c) }
        return String(decoding: line, as: UTF8.self)
    }

    /// Closes its standard input and waits for it to exit; returns its status and standard error.
    func finish() -> (status: Int32, stderr: String) {
        try? input.fileHandleForWriting.close()
        let err = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: err, as: UTF8.self))
    }
}
