// What the file layer logs and counts: handles opened and closed, bytes sealed and opened, tamper detections.
import DataProtectionKeys
import DataProtectionTelemetry
import Logging

extension ProtectedFiles {
    /// The domain's telemetry, from the keys' revocation (one mechanism: the domain carries it).
    package var telemetry: Telemetry { revocation.telemetry }

    /// Counts a handle made by `makeHandle` (`dataprotection_opens_total` or `_creates_total`, the open-handle meter)
    /// and logs it at trace; the path, class and generation only, never a key.
    func reportOpened(_ h: ProtectedFileHandle, generation: UInt32, created: Bool, via: ProtectedDataEntryPoint) {
        let t = telemetry, m = t.metrics, c = h.protectionClass
        if m.recording {
            (created ? m.creates : m.opens)[c].increment()
            m.openHandles[c].increment()
        }
        guard t.logger != nil else { return }
        t.log(.trace, created ? "created protected file" : "opened protected file", [
            "path": .string(h.path), "class": .string(c.description), "generation": .stringConvertible(generation),
            "operation": .string("\(via)"), "writable": .stringConvertible(h.writable),
        ])
    }

    /// Counts and logs a tamper detection: `error` (about `path`, of class `known`, or the header's) failed authentication.
    ///
    /// Called where the file layer gives up on a file (after the recovery retry), so one detection counts once.
    func reportTampered(_ error: ProtectionError, path: String, class known: ProtectionClass?, operation: String) {
        // An open that failed knows no class: the header is read again, keyless (the error path only).
        let c = known ?? (try? info(path))?.protectionClass
        telemetry.metrics.tamperDetections[c].increment()
        telemetry.log(.error, "tamper detected: authentication failed", [
            "path": .string(path), "class": .string(c?.description ?? "unknown"), "operation": .string(operation),
            "error": .string(error.message),
        ])
    }
}

extension ProtectedFiles {
    /// Logs a repair a journal needed (rolled back, rolled forward, discarded) at notice; nothing when there was none.
    func reportRepair(_ outcome: JournalRecovery, path: String, operation: String) {
        guard outcome != .nothingToDo else { return }
        telemetry.log(.notice, "repaired an interrupted change from its journal", [
            "path": .string(path), "outcome": .string("\(outcome)"), "operation": .string(operation),
        ])
    }
}

extension ProtectedFiles {
    /// Logs what `recoverTree` did: each repair at notice, each failure at warning, then the totals at info.
    func reportRepairs(_ report: RecoveryReport, under root: String) {
        let t = telemetry
        guard t.logger != nil else { return }
        for e in report.entries {
            t.log(.notice, "repair", ["path": .string(e.path), "outcome": .string("\(e.action)"), "operation": "recoverTree"])
        }
        for f in report.failures {
            t.log(.warning, "repair failed", ["path": .string(f.path ?? root), "error": .string(f.message), "operation": "recoverTree"])
        }
        t.log(.info, "recovered tree", [
            "path": .string(root), "operation": "recoverTree", "rolledBack": .stringConvertible(report.rolledBack),
            "rolledForward": .stringConvertible(report.rolledForward), "temporaryFilesRemoved": .stringConvertible(report.temporaryFilesRemoved),
            "inUse": .stringConvertible(report.inUse), "failures": .stringConvertible(report.failures.count),
        ])
    }
}

extension ProtectedFileHandle {
    /// Reports a closing handle: its bytes sealed and opened, and one open handle fewer (called once, by `finish`).
    func reportClosed(_ st: borrowing State) {
        let t = files.telemetry, m = t.metrics, c = protectionClass
        if m.recording {
            if st.bytesSealed > 0 { m.bytesSealed[c].increment(by: st.bytesSealed) }
            if st.bytesOpened > 0 { m.bytesOpened[c].increment(by: st.bytesOpened) }
            m.openHandles[c].decrement()
        }
        guard t.logger != nil else { return }
        t.log(.trace, "closed protected file", [
            "path": .string(path), "class": .string(c.description),
            "bytesSealed": .stringConvertible(st.bytesSealed), "bytesOpened": .stringConvertible(st.bytesOpened),
        ])
    }
}
