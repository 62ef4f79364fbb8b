import CoreMetrics
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A domain's logger and metric objects, carried to every layer that logs or counts (no global).
///
/// The metric objects are made once, here (a swift-metrics `Counter` costs a factory call and a lock to make), so
/// a call site only increments a cached object; hot paths (handle reads and writes) touch none of them per call:
/// a handle adds its bytes to its own state and reports them when it closes. A class, so that passing it around and
/// reading it from a domain's objects is one reference, not a copy of a logger.
public final class Telemetry: Sendable {
    /// Where this domain logs, with the `domain` metadata set; nil logs nothing.
    public let logger: Logger?
    /// The domain label of every metric and log line.
    public let domain: String
    /// The metric objects, labelled `dataprotection_*` (see `TelemetryMetrics`).
    public let metrics: TelemetryMetrics

    /// Telemetry for the domain `domain`.
    /// - Parameters:
    ///   - logger: where to log (the `domain` metadata is added); nil for no logs.
    ///   - domain: the domain's id as text, the `domain` dimension and metadata.
    ///   - factory: the metrics backend; default the process's bootstrapped one (`MetricsSystem.factory`).
    public init(logger: Logger? = nil, domain: String, factory: (any MetricsFactory)? = nil) {
        var logger = logger
        logger?[metadataKey: "domain"] = .string(domain)
        self.logger = logger
        self.domain = domain
        self.metrics = TelemetryMetrics(domain: domain, factory: factory ?? MetricsSystem.factory)
    }

    /// Telemetry for objects made without a domain (`InMemoryClassKeys`, a bare `FileCoordinator`): no logs, and
    /// metrics under the domain label `none` in the process's backend.
    public static func detached() -> Telemetry { Telemetry(domain: "none") }

    /// Logs `message` at `level` with `metadata`, if a logger is set (the message and metadata are built only then).
    @inlinable
    public func log(_ level: Logger.Level, _ message: @autoclosure () -> Logger.Message, _ metadata: @autoclosure () -> Logger.Metadata = [:]) {
        guard let logger, logger.logLevel <= level else { return }
        logger.log(level: level, message(), metadata: metadata())
    }

    /// Monotonic nanoseconds, for durations (`elapsed(since:)`).
    @inlinable
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// Nanoseconds since `start` (a `now()`).
    @inlinable
    public static func elapsed(since start: UInt64) -> Int64 { Int64(bitPattern: now() &- start) }

    /// Milliseconds as log metadata, three decimals.
    public static func millis(_ nanoseconds: Int64) -> Logger.MetadataValue {
        let us = nanoseconds / 1000
        let frac = us % 1000
        return .string("\(us / 1000).\(frac < 10 ? "00" : frac < 100 ? "0" : "")\(frac)")
    }
}
