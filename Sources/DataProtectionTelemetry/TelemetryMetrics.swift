import CoreMetrics

/// The metric objects of one domain, made once: counters, timers and the open-handle meter, per class where a class applies.
///
/// Labels (all with the dimension `domain`; those marked [class] also with `class`, Apple's name of the class):
/// - `dataprotection_opens_total` [class], `dataprotection_creates_total` [class]: handles opened and files created;
/// - `dataprotection_bytes_sealed_total` [class], `dataprotection_bytes_opened_total` [class]: plaintext bytes
///   written and read through handles, reported when the handle closes;
/// - `dataprotection_locked_errors_total` [class]: calls refused with `.locked`;
/// - `dataprotection_tamper_detections_total` [class, `unknown` when the header did not parse]: `.authenticationFailed`;
/// - `dataprotection_coordination_timeouts_total`;
/// - timers `dataprotection_lock_duration`, `dataprotection_unlock_duration`, `dataprotection_coordination_wait_duration`,
///   `dataprotection_key_fetch_duration` [class] (a per-file key wrapped or unwrapped through its class key);
/// - meter `dataprotection_open_handles` [class]: handles open now in this process.
public final class TelemetryMetrics: Sendable {
    /// False when the backend is swift-metrics' no-op one (nothing bootstrapped, no factory given): the per-open
    /// reports (opens, creates, handles, bytes, key-fetch timing) then skip their calls and clock reads entirely.
    public let recording: Bool
    public let opens: PerClass<Counter>
    public let creates: PerClass<Counter>
    public let bytesSealed: PerClass<Counter>
    public let bytesOpened: PerClass<Counter>
    public let lockedErrors: PerClass<Counter>
    public let tamperDetections: PerClass<Counter>
    public let coordinationTimeouts: Counter
    public let lockDuration: Timer
    public let unlockDuration: Timer
    public let coordinationWait: Timer
    public let keyFetch: PerClass<Timer>
    public let openHandles: PerClass<Meter>

    init(domain: String, factory: any MetricsFactory) {
        let d = [("domain", domain)]
        recording = !(factory is NOOPMetricsHandler)
        func counters(_ label: String) -> PerClass<Counter> {
            PerClass { c in Counter(label: label, dimensions: [("class", c)] + d, factory: factory) }
        }
        opens = counters("dataprotection_opens_total")
        creates = counters("dataprotection_creates_total")
        bytesSealed = counters("dataprotection_bytes_sealed_total")
        bytesOpened = counters("dataprotection_bytes_opened_total")
        lockedErrors = counters("dataprotection_locked_errors_total")
        tamperDetections = counters("dataprotection_tamper_detections_total")
        coordinationTimeouts = Counter(label: "dataprotection_coordination_timeouts_total", dimensions: d, factory: factory)
        lockDuration = Timer(label: "dataprotection_lock_duration", dimensions: d, factory: factory)
        unlockDuration = Timer(label: "dataprotection_unlock_duration", dimensions: d, factory: factory)
        coordinationWait = Timer(label: "dataprotection_coordination_wait_duration", dimensions: d, factory: factory)
        keyFetch = PerClass { c in Timer(label: "dataprotection_key_fetch_duration", dimensions: [("class", c)] + d, factory: factory) }
        openHandles = PerClass { c in Meter(label: "dataprotection_open_handles", dimensions: [("class", c)] + d, factory: factory) }
    }

    /// Records a key fetch of the class with raw value `rawClass` that started at `t0` (`Telemetry.now()`).
    public func keyFetched(_ rawClass: UInt8, since t0: UInt64) {
        keyFetch[raw: rawClass].recordNanoseconds(Telemetry.elapsed(since: t0))
    }
}

/// One metric object per protection class, and one for `unknown` (a file whose class could not be read).
///
/// Indexed by the class's raw value (1 `complete` … 4 `none`, FORMAT.md), so this module needs no crypto or format
/// module (FileCoordination depends on it); DataProtectionKeys adds a subscript by `ProtectionClass`.
public struct PerClass<M: Sendable>: Sendable {
    /// The `class` dimension of raw values 1…4, then `unknown`.
    public static var labels: [String] { ["complete", "completeUnlessOpen", "completeUntilFirstUserAuthentication", "none", "unknown"] }
    @usableFromInline let objects: [M]

    init(_ make: (String) -> M) { objects = Self.labels.map(make) }

    /// The object of the class with raw value `raw` (1…4); `unknown` for nil or any other value.
    @inlinable public subscript(raw raw: UInt8?) -> M {
        guard let raw, raw >= 1, Int(raw) < objects.count else { return objects[objects.count - 1] }
        return objects[Int(raw) - 1]
    }
}
