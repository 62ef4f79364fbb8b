// The dataprotection_* metrics, recorded into swift-metrics' test backend (MetricsTestKit) by a real domain.
import DataProtection
import DataProtectionFormat
import DataProtectionTelemetry
import FileCoordination
import Foundation
import MetricsTestKit
import XCTest

final class TelemetryMetricsTests: DomainTestCase {
    /// Opens, creates, bytes, handles, `locked` refusals, tamper detections, time-outs and the four timers, each with
    /// its `class` and `domain` dimensions, counted by a domain given a TestMetrics backend.
    func testADomainRecordsItsCountersTimersAndOpenHandles() throws {
        let metrics = TestMetrics()
        let domain = try ProtectionDomain.create(
            at: location, passphrase: try secret("metrics"), kdf: .minimumForTests, keyStore: store, metrics: metrics) { _ in }
        let d = ("domain", "\(domain.id)")
        func dims(_ c: ProtectionClass) -> [(String, String)] { [("class", "\(c)"), d] }
        try domain.unlock(passphrase: try secret("metrics"))
        XCTAssertEqual(try metrics.expectTimer("dataprotection_unlock_duration", [d]).values.count, 1)

        let path = root + "/a"
        try domain.files.write(Array(repeating: 7, count: 10_000), to: path, protection: .complete)  // a create (the temporary)
        let h = try domain.files.open(path)
        XCTAssertEqual(try metrics.expectMeter("dataprotection_open_handles", dims(.complete)).lastValue, 1)
        XCTAssertEqual(try h.read(at: 0, count: 4096).count, 4096)
        XCTAssertEqual(try h.read(at: 4096, count: 10_000).count, 10_000 - 4096)
        // Reads touch no metric: the bytes are reported when the handle closes.
        XCTAssertEqual(metrics.counterTotal(label: "dataprotection_bytes_opened_total", dimensions: dims(.complete)), 0)
        h.close()
        XCTAssertEqual(try metrics.expectMeter("dataprotection_open_handles", dims(.complete)).lastValue, 0)
        XCTAssertEqual(metrics.counterTotal(label: "dataprotection_bytes_opened_total", dimensions: dims(.complete)), 10_000)
        XCTAssertEqual(metrics.counterTotal(label: "dataprotection_bytes_sealed_total", dimensions: dims(.complete)), 10_000)
        XCTAssertEqual(metrics.counterTotal(label: "dataprotection_creates_total", dimensions: dims(.complete)), 1)
        XCTAssertEqual(metrics.counterTotal(label: "dataprotection_opens_total", dimensions: dims(.complete)), 1)
        XCTAssertEqual(try metrics.expectTimer("dataprotection_key_fetch_duration", dims(.complete)).values.count, 2, "one wrap, one unwrap")

        // A second class counts apart.
        try domain.files.write([1, 2, 3], to: root + "/b", protection: .completeUnlessOpen)
        XCTAssertEqual(metrics.counterTotal(label: "dataprotection_creates_total", dimensions: dims(.completeUnlessOpen)), 1)
        XCTAssertEqual(metrics.counterTotal(label: "dataprotection_bytes_sealed_total", dimensions: dims(.completeUnlessOpen)), 3)

        // Tamper: counted once per failed read (after the recovery retry), under the file's class for a handle.
        var bytes = try readBytes(path)
        bytes[FileHeader.size + 40] ^= 0x80
        try writeBytes(bytes, path)
        assertProtectionError([.authenticationFailed]) { _ = try domain.files.read(path) }
        XCTAssertEqual(metrics.counterTotal(label: "dataprotection_tamper_detections_total"), 1)

        // Lock: its latency, then `.locked` refusals at open and on a handle opened before the lock.
        let held = try domain.files.open(root + "/b")
        try domain.lock(grace: .zero)
        XCTAssertEqual(try metrics.expectTimer("dataprotection_lock_duration", [d]).values.count, 1)
        assertProtectionError([.locked]) { _ = try domain.files.open(root + "/b") }
        XCTAssertEqual(metrics.counterTotal(label: "dataprotection_locked_errors_total", dimensions: dims(.completeUnlessOpen)), 1)
        assertProtectionError([.locked]) { _ = try domain.files.create(root + "/c", protection: .complete) }
        XCTAssertEqual(metrics.counterTotal(label: "dataprotection_locked_errors_total", dimensions: dims(.complete)), 1)
        held.close()

        // Coordination: a granted wait is timed; a time-out is counted.
        let coordination = try CoordinationDomain(root: URL(fileURLWithPath: root))
        let item = URL(fileURLWithPath: root + "/coordinated")
        let waiter = FileCoordinator(domain: coordination, timeout: .milliseconds(200), telemetry: domain.telemetry)
        let waits = try metrics.expectTimer("dataprotection_coordination_wait_duration", [d]).values.count  // the domain's coordinated writes
        try waiter.coordinate(readingItemAt: item) { _ in }
        XCTAssertEqual(try metrics.expectTimer("dataprotection_coordination_wait_duration", [d]).values.count, waits + 1)
        let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? FileCoordinator(domain: coordination).coordinate(writingItemAt: item) { _ in holding.signal(); release.wait() }
            done.signal()
        }
        holding.wait()
        XCTAssertThrowsError(try waiter.coordinate(readingItemAt: item) { _ in }) { error in
            XCTAssertEqual((error as? CoordinationError)?.code, .timedOut, "\(error)")
        }
        release.signal()
        done.wait()
        XCTAssertEqual(metrics.counterTotal(label: "dataprotection_coordination_timeouts_total", dimensions: [d]), 1)
    }

    /// The metric objects are made once per domain: a thousand opens make no new counter (the backend sees each label once).
    func testMetricObjectsAreMadeOncePerDomain() throws {
        let metrics = TestMetrics()
        let domain = try ProtectionDomain.create(
            at: location, passphrase: try secret("m"), kdf: .minimumForTests, keyStore: store, metrics: metrics) { _ in }
        try domain.files.write([1], to: root + "/n", protection: .none)
        let made = metrics.counters.count
        for _ in 0..<1000 { try domain.files.open(root + "/n").close() }
        XCTAssertEqual(metrics.counters.count, made)
        XCTAssertEqual(metrics.counterTotal(label: "dataprotection_opens_total", dimensions: [("class", "none"), ("domain", "\(domain.id)")]), 1000)
    }
}
