// Spawning coordination-worker as a real process, and reading its lines.
import Foundation
import TestSupport
import XCTest

/// A running coordination-worker with pipes to its stdin and stdout.
final class WorkerProcess: @unchecked Sendable {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var buffer = Data()

    /// Starts the worker with `arguments`.
    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: try builtProduct("coordination-worker"))
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    /// The next line the worker prints, or nil at end of output.
    func line() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }

    /// Reads lines until one starts with `prefix`; fails the test at end of output, or after
    /// `seconds` (the worker is then killed, so a lost message fails the test instead of hanging it).
    @discardableResult
    func expect(_ prefix: String, within seconds: Double = 30, file: StaticString = #filePath, line number: UInt = #line) -> String {
        let pid = process.processIdentifier
        let watchdog = DispatchWorkItem { Foundation.kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: watchdog)
        defer { watchdog.cancel() }
        while let next = line() {
            if next.hasPrefix(prefix) { return next }
        }
        XCTFail("worker ended (or was killed after \(seconds) s) without printing '\(prefix)'", file: file, line: number)
        return ""
    }

    /// Sends one line to the worker's stdin.
    func send(_ text: String) {
        input.fileHandleForWriting.write(Data((text + "\n").utf8))
    }

    /// Closes the worker's stdin (most commands then finish).
    func closeInput() {
        try? input.fileHandleForWriting.close()
    }

    /// Waits for the worker to exit and returns its status.
    @discardableResult
    func finish() -> Int32 {
        closeInput()
        process.waitUntilExit()
        return process.terminationStatus
    }

    func kill() {
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// The directory that holds this test run's scratch directories; removed when the test process exits.
private let scratchBase: String = {
    atexit {
        _ = try? FileManager.default.removeItem(atPath: "/tmp/fc-tests-\(getpid())")
    }
    return "/tmp/fc-tests-\(getpid())"
}()

/// A fresh directory for one test.
func makeScratchDirectory(_ name: String = #function) throws -> URL {
    let safe = name.filter { $0.isLetter || $0.isNumber }
    let url = URL(fileURLWithPath: "\(scratchBase)/\(safe)-\(UInt32.random(in: 0...UInt32.max))", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// Replays a stress log and returns the overlaps that coordination should have excluded.
func conflictsInLog(_ text: String) -> [String] {
    var active: [(pid: String, access: String, name: String)] = []
    var conflicts: [String] = []
    for line in text.split(separator: "\n") {
        let fields = line.split(separator: " ").map(String.init)
        guard fields.count == 4 else {
            conflicts.append("malformed line '\(line)'")
            continue
        }
        let entry = (pid: fields[1], access: fields[2], name: fields[3])
        if fields[0] == "E" {
            if let index = active.firstIndex(where: { $0 == entry }) { active.remove(at: index) }
            continue
        }
        for other in active where conflict(entry, other) {
            conflicts.append("\(entry.access) \(entry.name) by \(entry.pid) began during \(other.access) \(other.name) by \(other.pid)")
        }
        active.append(entry)
    }
    return Array(conflicts.prefix(5))
}

private func conflict(_ a: (pid: String, access: String, name: String), _ b: (pid: String, access: String, name: String)) -> Bool {
    if a.name == b.name { return a.access != "read" || b.access != "read" }
    if a.name.hasPrefix(b.name + "/") { return b.access == "move" }
    if b.name.hasPrefix(a.name + "/") { return a.access == "move" }
    return false
}

/// The largest number of sections of `access` that were open at once in a stress log.
func maximumConcurrent(_ access: String, in text: String) -> Int {
    var open = 0
    var maximum = 0
    for line in text.split(separator: "\n") {
        let fields = line.split(separator: " ")
        guard fields.count == 4, fields[2] == access else { continue }
        open += fields[0] == "B" ? 1 : -1
        maximum = max(maximum, open)
    }
    return maximum
}
