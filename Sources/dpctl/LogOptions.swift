// `--log-level` and `$DP_LOG_LEVEL`: the domain's structured swift-log output on standard error.
import DataProtection
import Foundation
import Logging

extension DomainOptions {
    /// The logger the domain gets: swift-log's `StreamLogHandler` on standard error at `--log-level`, else
    /// `$DP_LOG_LEVEL`; nil (no log at all, the default) when neither is set or the level is `off`.
    ///
    /// The library never logs a key byte, passphrase or plaintext at any level (TelemetryRedactionTests), so even
    /// `trace` output is safe to keep; it goes to standard error so standard output stays the command's result.
    /// - Throws: `CLIError` (usage) for an unknown level.
    func logger() throws -> Logger? {
        let chosen = logLevel ?? ProcessInfo.processInfo.environment["DP_LOG_LEVEL"].flatMap { $0.isEmpty ? nil : $0 }
        guard let chosen, chosen != "off" else { return nil }
        guard let level = Logger.Level(rawValue: chosen.lowercased()) else {
            throw CLIError(
                exit: .usage, message: "unknown log level '\(chosen)'",
                hint: "use trace, debug, info, notice, warning, error, critical or off (--log-level or $DP_LOG_LEVEL)")
        }
        var logger = Logger(label: "dpctl") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = level
        return logger
    }
}

/// The command line with a `--log-level` given before the subcommand moved to the subcommand's options, where every
/// command's `DomainOptions` reads it: `dpctl --log-level debug unlock` is `dpctl unlock --log-level debug`.
/// - Parameter arguments: the arguments after the program name.
/// - Returns: them unchanged when no `--log-level` leads; else the rest, then the moved option (before a `--`).
func placingLeadingLogLevel(_ arguments: [String]) -> [String] {
    var rest = arguments[...]
    var moved: [String] = []
    while let first = rest.first, first == "--log-level" || first.hasPrefix("--log-level=") {
        let count = first == "--log-level" ? min(2, rest.count) : 1
        moved += rest.prefix(count)
        rest = rest.dropFirst(count)
    }
    guard !moved.isEmpty, !rest.isEmpty else { return arguments }
    var placed = Array(rest)
    placed.insert(contentsOf: moved, at: placed.firstIndex(of: "--") ?? placed.count)
    return placed
}
