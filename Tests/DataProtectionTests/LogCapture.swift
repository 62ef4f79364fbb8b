// A LogHandler that keeps every line it is given (message, level, merged metadata), for tests that read the logs.
import Foundation
import Locking
import Logging

/// Every log line a `Logger` made with `logger(level:)` received, with its metadata merged as a backend would print it.
final class LogCapture: Sendable {
    struct Line: Sendable {
        let level: Logger.Level
        let message: String
        let metadata: [String: String]

        /// The line as one text: message, then `key=value` pairs sorted by key.
        var text: String { ([message] + metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }).joined(separator: " ") }
    }

    private let lines = Locked<[Line]>([])

    var all: [Line] { lines.withLock { $0 } }

    /// A logger at `level` whose lines this capture keeps.
    func logger(level: Logger.Level = .trace) -> Logger {
        var l = Logger(label: "dataprotection.test") { _ in Handler(capture: self) }
        l.logLevel = level
        return l
    }

    /// The lines whose message is `message`.
    func lines(_ message: String) -> [Line] { all.filter { $0.message == message } }

    fileprivate func append(_ line: Line) { lines.withLock { $0.append(line) } }

    private struct Handler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            capture.append(Line(level: event.level, message: "\(event.message)", metadata: merged.mapValues { "\($0)" }))
        }
    }
}
