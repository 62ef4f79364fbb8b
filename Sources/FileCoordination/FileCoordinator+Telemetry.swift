// Coordination waits and time-outs, timed and logged through the coordinator's telemetry.
import DataProtectionTelemetry
import Logging

extension FileCoordinator {
    /// Runs `grant` (the wait for other holders), records its duration (`dataprotection_coordination_wait_duration`)
    /// and logs it at trace; a time-out is counted (`dataprotection_coordination_timeouts_total`) and logged as a warning.
    func observed(_ operation: CoordinationOperation, _ grant: () throws(CoordinationError) -> CoordinationOperation.Granted)
        throws(CoordinationError) -> CoordinationOperation.Granted
    {
        let t0 = Telemetry.now()
        do throws(CoordinationError) {
            let granted = try grant()
            report(operation, t0, nil)
            return granted
        } catch {
            report(operation, t0, error)
            throw error
        }
    }

    /// The async form of `observed(_:_:)`.
    func observed(_ operation: CoordinationOperation, _ grant: () async throws(CoordinationError) -> CoordinationOperation.Granted)
        async throws(CoordinationError) -> CoordinationOperation.Granted
    {
        let t0 = Telemetry.now()
        do throws(CoordinationError) {
            let granted = try await grant()
            report(operation, t0, nil)
            return granted
        } catch {
            report(operation, t0, error)
            throw error
        }
    }

    private func report(_ operation: CoordinationOperation, _ t0: UInt64, _ error: CoordinationError?) {
        let ns = Telemetry.elapsed(since: t0)
        telemetry.metrics.coordinationWait.recordNanoseconds(ns)
        if error?.code == .timedOut { telemetry.metrics.coordinationTimeouts.increment() }
        guard telemetry.logger != nil else { return }
        var metadata: Logger.Metadata = [
            "operation": .string(operation.items.map { $0.isRead ? "read" : "write" }.joined(separator: ",")),
            "path": .string(operation.items.map(\.absolute).joined(separator: ",")),
            "duration_ms": Telemetry.millis(ns),
        ]
        guard let error else { return telemetry.log(.trace, "coordination granted", metadata) }
        if let e = error.errno { metadata["errno"] = .stringConvertible(e) }
        metadata["error"] = .string(error.code.rawValue)
        if error.code == .timedOut {
            telemetry.log(.warning, "coordination timed out waiting for other holders", metadata)
        } else {
            telemetry.log(.debug, "coordination wait failed", metadata)
        }
    }
}
