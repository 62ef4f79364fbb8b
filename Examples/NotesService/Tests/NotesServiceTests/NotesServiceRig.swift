// The rig: a state directory with two users, a session keyring of its own, dpctl, curl, and the running service.
import Foundation
import KernelKeyring
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Base class: each test gets its own session keyring (joined in setUp; every process it starts inherits it), its own
/// `XDG_RUNTIME_DIR` (where the live lock's endpoints live) and a state directory with the users alice and bob, each
/// with a domain made and unlocked by the real dpctl. The service is the built `notes-service`, a real process on a
/// port of loopback the kernel picks (`--port 0`; it prints the one it got).
class NotesServiceTestCase: XCTestCase {
    var dir = ""
    var state = ""
    var passphraseFile = ""
    var environment: [String: String] = [:]
    let users = ["alice", "bob"]

    override func setUpWithError() throws {
        try super.setUpWithError()
        // Keys go to this session keyring only (DATAPROTECTION_KEYRING=session): nothing reaches @u or outlives the test.
        _ = try Keyring().joinNewSessionKeyring()
        dir = NSTemporaryDirectory() + "notes-\(name.filter { $0.isLetter || $0.isNumber }.suffix(40))-\(UUID().uuidString.prefix(8))"
        state = dir + "/state"
        let runtime = dir + "/run"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.createDirectory(atPath: state + "/users", withIntermediateDirectories: true)
        addTeardownBlock { [dir] in try? FileManager.default.removeItem(atPath: dir) }
        passphraseFile = dir + "/passphrase"
        try Data("correct horse battery\n".utf8).write(to: URL(fileURLWithPath: passphraseFile))
        environment = [
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": dir, "XDG_RUNTIME_DIR": runtime,
            "DATAPROTECTION_DEVICE_DIR": state + "/devices", "DATAPROTECTION_KEYRING": "session", "LOG_LEVEL": "info",
        ]
        for user in users {
            try dpctl(user, ["init", "--passphrase-file", passphraseFile, "--kdf-preset", "minimum"])
            try dpctl(user, ["unlock", "--passphrase-file", passphraseFile])
        }
    }

    // MARK: Paths

    func home(_ user: String) -> String { "\(state)/users/\(user)/domain" }
    func container(_ user: String) -> String { "\(state)/users/\(user)/container" }
    /// A file of `user`'s container, by its path inside it.
    func onDisk(_ user: String, _ path: String) -> String { container(user) + "/" + path }

    /// Every entry of a container directory, hidden ones (an atomic replace's temporary files) included.
    func entries(_ user: String, _ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: onDisk(user, directory)).sorted()
    }

    func rawBytes(_ user: String, _ path: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: onDisk(user, path))))
    }

    // MARK: Processes

    /// Runs `executable` to the end, in the test's environment plus `env`.
    @discardableResult
    func run(_ executable: String, _ arguments: [String], env: [String: String] = [:]) throws -> Finished {
        try runToEnd(executable, arguments, environment.merging(env) { $1 })
    }

    /// dpctl on `user`'s domain; fails the test unless it exits 0.
    @discardableResult
    func dpctl(_ user: String, _ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws -> Finished {
        let r = try run(try builtProduct("dpctl"), arguments, env: ["DATAPROTECTION_HOME": home(user)])
        XCTAssertEqual(r.status, 0, "dpctl \(arguments.joined(separator: " ")) for \(user): \(r.stderr)", file: file, line: line)
        return r
    }

    /// `dpctl ls --json` of one file of `user`'s container: its class and plaintext size, read from its header.
    func header(_ user: String, _ path: String) throws -> (protection: String, size: Int) {
        let r = try dpctl(user, ["ls", "--json", onDisk(user, path)])
        let rows = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.stdout)) as? [[String: Any]])
        let row = try XCTUnwrap(rows.first)
        return (try XCTUnwrap(row["class"] as? String), try XCTUnwrap(row["size"] as? Int))
    }

    // MARK: HTTP

    /// A real HTTP request on loopback, made by curl (`curlRequest`).
    func http(_ method: String, _ url: String, _ body: [UInt8]? = nil) throws -> Reply {
        try curlRequest(method, url, body, scratch: dir, environment: environment)
    }

    // MARK: The service

    /// A running notes-service; its standard output and error go to a log file the test reads.
    final class Service {
        let process: Process
        let log: String
        let url: String

        init(process: Process, log: String, url: String) {
            self.process = process
            self.log = log
            self.url = url
        }

        /// The lines it has written so far.
        var lines: [String] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }

        /// Waits (up to `seconds`) until a line starts with `prefix`; returns whether one did.
        func said(_ prefix: String, within seconds: Double = 30) -> Bool {
            let deadline = Date(timeIntervalSinceNow: seconds)
            while Date() < deadline {
                if lines.contains(where: { $0.hasPrefix(prefix) }) { return true }
                usleep(20_000)
            }
            return lines.contains { $0.hasPrefix(prefix) }
        }

        /// Sends SIGTERM and waits (up to `seconds`) for the exit; returns its status, or -1 when it had to be killed.
        func terminate(within seconds: Double = 30) -> Int32 {
            kill(process.processIdentifier, SIGTERM)
            return waitForExit(within: seconds)
        }

        /// Waits (up to `seconds`) for the exit; returns its status, or -1 after a SIGKILL when it did not exit.
        func waitForExit(within seconds: Double = 30) -> Int32 {
            let deadline = Date(timeIntervalSinceNow: seconds)
            while process.isRunning && Date() < deadline { usleep(20_000) }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return -1
            }
            process.waitUntilExit()
            return process.terminationStatus
        }
    }

    /// Starts notes-service on a free loopback port and waits until it listens.
    func startService() throws -> Service {
        let log = "\(dir)/service-\(UUID().uuidString.prefix(8)).log"
        FileManager.default.createFile(atPath: log, contents: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try builtProduct("notes-service"))
        p.arguments = ["--state", state, "--host", "127.0.0.1", "--port", "0"]
        p.environment = environment
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        p.standardOutput = output
        p.standardError = output
        p.standardInput = FileHandle.nullDevice
        try p.run()
        try output.close()
        addTeardownBlock {
            if p.isRunning { kill(p.processIdentifier, SIGKILL); p.waitUntilExit() }
        }
        let prefix = "notes-service: listening on "
        let service = Service(process: p, log: log, url: "")
        guard service.said(prefix, within: 60), let line = service.lines.first(where: { $0.hasPrefix(prefix) }) else {
            throw Failure("notes-service did not start:\n" + service.lines.joined(separator: "\n"))
        }
        return Service(process: p, log: log, url: String(line.dropFirst(prefix.count)))
    }

    /// Polls `condition` until it holds or `seconds` pass (never a bare sleep).
    func eventually(seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        while Date() < deadline {
            if try condition() { return true }
            usleep(20_000)
        }
        return false
    }
}

/// A test's own failure, with what it saw.
struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// A value one thread sets and another reads.
final class Locked<T>: @unchecked Sendable {  // every access holds `lock`
    fileprivate let lock = NSLock()
    fileprivate var stored: T
    private var wasSet = false
    init(_ v: T) { stored = v }
    func set(_ v: T) { lock.withLock { stored = v; wasSet = true } }
    var value: T { lock.withLock { stored } }
    var isSet: Bool { lock.withLock { wasSet } }
}

/// The path of a product built beside this test bundle (notes-service, dpctl): `swift build --build-tests` of this
/// package puts both in its build directory.
func builtProduct(_ name: String) throws -> String {
    var directory = URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")).deletingLastPathComponent()
    for _ in 0..<4 {
        let path = directory.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: path) { return path }
        directory = directory.deletingLastPathComponent()
    }
    throw Failure("'\(name)' is not built beside the tests; run `swift build --build-tests --package-path Examples/NotesService`")
}

/// `count` bytes that name `tag` in their first line, then a pattern (every byte value occurs), so a read of any other
/// bytes, a shorter read or a mix of two uploads cannot pass as these.
func payload(_ tag: String, _ count: Int) -> [UInt8] {
    var b = Array("payload \(tag)\n".utf8)
    var x = UInt32(truncatingIfNeeded: tag.utf8.reduce(2_166_136_261) { ($0 ^ UInt32($1)) &* 16_777_619 })
    while b.count < count {
        x = x &* 1_103_515_245 &+ 12345
        b.append(UInt8(truncatingIfNeeded: x >> 16))
    }
    return Array(b.prefix(count))
}

extension Array where Element == UInt8 {
    /// Whether `needle` occurs in these bytes.
    func containsBytes(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return needle.isEmpty }
        return (0...(count - needle.count)).contains { i in self[i..<(i + needle.count)].elementsEqual(needle) }
    }
}

extension Locked {
    /// Changes the value under the lock.
    func withValue(_ change: (inout T) -> Void) { lock.withLock { change(&stored) } }
}

/// What a finished process left behind.
struct Finished: Sendable {
    var status: Int32
    var stdout: [UInt8]
    var stderr: String
    var text: String { String(decoding: stdout, as: UTF8.self) }
}

/// An HTTP reply as curl got it.
struct Reply: Sendable {
    /// The HTTP status; 0 when curl got none (connection refused or closed).
    var status: Int
    var body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// Runs `executable` to the end with exactly `environment`; both output pipes are drained at once.
func runToEnd(_ executable: String, _ arguments: [String], _ environment: [String: String]) throws -> Finished {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: executable)
    p.arguments = arguments
    p.environment = environment
    let o = Pipe(), e = Pipe()
    p.standardInput = FileHandle.nullDevice
    p.standardOutput = o
    p.standardError = e
    try p.run()
    let err = Locked(Data())
    let drain = Thread { err.set(e.fileHandleForReading.readDataToEndOfFile()) }
    drain.start()
    let out = o.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    while !err.isSet { usleep(1000) }
    return Finished(status: p.terminationStatus, stdout: Array(out), stderr: String(decoding: err.value, as: UTF8.self))
}

/// A real HTTP request on loopback, made by curl; the body goes through a file under `scratch`.
func curlRequest(_ method: String, _ url: String, _ body: [UInt8]?, scratch: String,
                 environment: [String: String]) throws -> Reply {
    let tag = UUID().uuidString
    let out = "\(scratch)/curl-\(tag).out"
    var args = curlArguments(method, answerTo: out)
    if let body {
        let input = "\(scratch)/curl-\(tag).in"
        try Data(body).write(to: URL(fileURLWithPath: input))
        args += ["--data-binary", "@" + input, "-H", "Content-Type: application/octet-stream"]
    }
    let r = try runToEnd("/usr/bin/curl", args + [url], environment)
    return curlReply(exitStatus: r.status, written: r.text, answerIn: out)
}

/// curl's options for a `method` request that writes the answer's body to `out` and its status code to standard
/// output (no `Expect: 100-continue` pause before a body).
func curlArguments(_ method: String, answerTo out: String) -> [String] {
    ["-s", "-S", "-o", out, "-w", "%{http_code}", "-X", method, "-H", "Expect:"]
}

/// What the server answered a curl run of `curlArguments`: the status code curl wrote (0 when curl failed) and the
/// body in `out`.
func curlReply(exitStatus: Int32, written: String, answerIn out: String) -> Reply {
    let body = (try? Data(contentsOf: URL(fileURLWithPath: out))).map { Array($0) } ?? []
    return Reply(status: exitStatus == 0 ? Int(written) ?? 0 : 0, body: body)
}

/// Fails unless `got` is `want`, saying the sizes and the first differing offset (not the bytes: they are large).
func assertSameBytes(_ got: [UInt8], _ want: [UInt8], _ message: String = "", file: StaticString = #filePath, line: UInt = #line) {
    guard got != want else { return }
    let first = zip(got, want).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(got.count, want.count)
    let head = String(decoding: got.prefix(120), as: UTF8.self)
    XCTFail("\(message): got \(got.count) bytes, want \(want.count); first difference at \(first); got begins \(head.debugDescription)", file: file, line: line)
}

/// A PUT whose body the test feeds to curl through a pipe: with its `Content-Length` declared and only part of the body
/// sent, the request is certainly in flight, however slow the machine, until the test sends the rest.
final class StreamedPut: @unchecked Sendable {  // `send` and `finish` are called from one thread at a time
    private let curl = Process()
    private let input = Pipe(), output = Pipe()
    private let out: String

    init(_ url: String, length: Int, scratch: String, environment: [String: String]) throws {
        out = "\(scratch)/curl-\(UUID().uuidString).out"
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        // `-T -` streams standard input; the emptied Transfer-Encoding header keeps curl from chunking it, so the
        // server sees a plain body of the declared length.
        curl.arguments = curlArguments("PUT", answerTo: out) + [
            "-T", "-", "-H", "Transfer-Encoding:", "-H", "Content-Length: \(length)",
            "-H", "Content-Type: application/octet-stream", url,
        ]
        curl.environment = environment
        curl.standardInput = input
        curl.standardOutput = output
        curl.standardError = FileHandle.nullDevice
        try curl.run()
    }

    /// Writes `bytes` of the body (blocks until curl has taken them from the pipe).
    func send(_ bytes: ArraySlice<UInt8>) throws { try input.fileHandleForWriting.write(contentsOf: Data(bytes)) }

    /// Ends the body, waits for curl, and returns what the server answered.
    func finish() -> Reply {
        try? input.fileHandleForWriting.close()
        let status = output.fileHandleForReading.readDataToEndOfFile()
        curl.waitUntilExit()
        return curlReply(exitStatus: curl.terminationStatus, written: String(decoding: status, as: UTF8.self), answerIn: out)
    }
}
