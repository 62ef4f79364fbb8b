// The driver's command line: a command, then `--name value` options and bare `--flag`s.
import FileCoordination
import Foundation

/// Why a run could not be measured.
struct BenchError: Error, CustomStringConvertible {
    let description: String
}

/// A parsed command line.
struct Options {
    let command: String
    private let pairs: [String: String?]

    init(_ words: ArraySlice<String>) throws {
        guard let command = words.first else { throw BenchError(description: "missing command") }
        self.command = command
        var pairs: [String: String?] = [:]
        var words = words.dropFirst()
        while let word = words.popFirst() {
            guard word.hasPrefix("--") else { throw BenchError(description: "unexpected argument '\(word)'") }
            let value = words.first.flatMap { $0.hasPrefix("--") ? nil : $0 }
            if value != nil { words.removeFirst() }
            pairs[String(word.dropFirst(2))] = .some(value)
        }
        self.pairs = pairs
    }

    func string(_ name: String) throws -> String {
        guard case let .some(.some(value)) = pairs[name] else { throw BenchError(description: "missing --\(name) VALUE") }
        return value
    }

    func int(_ name: String, default fallback: Int? = nil) throws -> Int {
        if pairs[name] == nil, let fallback { return fallback }
        let text = try string(name)
        guard let value = Int(text) else { throw BenchError(description: "--\(name) takes a whole number, not '\(text)'") }
        return value
    }

    func flag(_ name: String) -> Bool { pairs[name] != nil }

    /// The coordination domain rooted at --root.
    func domain() throws -> CoordinationDomain { try CoordinationDomain(root: URL(fileURLWithPath: try string("root"))) }

    /// --item, under --root.
    func item() throws -> URL { URL(fileURLWithPath: try string("root")).appendingPathComponent(try string("item")) }
}

/// Prints one line to stdout at once, so the driver reads it while the peer runs.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// CLOCK_MONOTONIC in microseconds, the same clock in every process.
func monotonicMicroseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
}
