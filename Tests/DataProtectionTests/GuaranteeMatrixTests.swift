@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam, test hooks
import Foundation
import GuaranteeMatrix
import Locking
import ProtectionCrypto
import Synchronization
import TestSupport
import XCTest

/// The guarantee matrix (issue 19): every public entry point that opens, creates, reads or writes protected data
/// (`ProtectedDataEntryPoint`, the list the API itself names when it asks for keys) × every class × {unlocked,
/// locked before open, locked while open}, in this process and in another one (`guarantee-worker`).
///
/// Each cell either works as DESIGN.md's class table says (reads return exactly the plaintext, writes leave exactly
/// what they wrote) or fails `.locked`, returning no plaintext and leaving every file as it was. "Locked while open"
/// for a whole-file call starts the lock at the one moment the old code got wrong (issue 19 defect 5): the call has
/// unwrapped its key and has not yet registered the handle holding it (`AdmissionProbe`).
final class GuaranteeMatrixTests: DomainTestCase {
    /// Results by process, for the printed table.
    private var table: [String: [String: String]] = [:]

    func testEveryEntryPointHonoursTheClassTableInThisProcess() throws {
        // The in-process store: the lock runs on another thread (a kernel session keyring belongs to one thread).
        let domain = try makeDomain(store: .inProcess, at: "inproc")
        let fixture = try MatrixFixture(domain: domain, directory: root + "/inproc-files", create: true)
        var failures = 0
        for cell in Self.cells {
            ProtectedDataEntryPoint.resetObserved()
            try fixture.prepare(cell)
            ProtectedDataEntryPoint.resetObserved()
            let result: CellResult
            switch cell.timing {
            case .unlocked:
                result = CellResult { try fixture.use(cell, try fixture.open(cell)) }
            case .lockedBeforeOpen:
                try lock(domain, cell)
                result = CellResult { try fixture.use(cell, try fixture.open(cell)) }
            case .lockedWhileOpen where cell.opensHandle:
                result = CellResult {
                    let h = try fixture.open(cell)
                    try lock(domain, cell)
                    return try fixture.use(cell, h)
                }
            case .lockedWhileOpen:
                result = try lockingInsideTheCall(domain) { CellResult { try fixture.use(cell, nil) } }
            }
            let observed = ProtectedDataEntryPoint.observed
            failures += try judge(cell, result, observed: observed, fixture: fixture, process: "this process")
        }
        print(render("this process"))
        XCTAssertEqual(failures, 0)
    }

    func testEveryEntryPointHonoursTheClassTableInAnotherProcess() throws {
        let worker = try builtProduct("guarantee-worker")
        let domain = try makeDomain(store: store, at: "xproc")
        let directory = root + "/xproc-files"
        let fixture = try MatrixFixture(domain: domain, directory: directory, create: true)
        var failures = 0
        for cell in Self.cells {
            try fixture.prepare(cell)
            if cell.timing == .lockedBeforeOpen { try lock(domain, cell) }
            // Started from this thread: the worker inherits this thread's session keyring, where the keys are.
            let child = try WorkerProcess(worker, [
                domain.location.home, domain.location.deviceDirectory, directory,
                "\(cell.entry.rawValue)", "\(cell.protection.rawValue)", cell.timing.rawValue,
            ])
            var line = try child.line()
            if line == "OPENED" {
                try lock(domain, cell)
                if cell.opensHandle { try child.send("GO") }
                line = try child.line()
            }
            guard line.hasPrefix("OBSERVED ") else { XCTFail("\(cell): the worker said '\(line)'; stderr: \(child.finish())"); failures += 1; continue }
            let observed = Set(line.dropFirst(9).split(separator: ",").compactMap { Int($0).flatMap(ProtectedDataEntryPoint.init(rawValue:)) })
            let resultLine = try child.line()
            _ = child.finish()
            guard resultLine.hasPrefix("RESULT "), let result = CellResult(line: String(resultLine.dropFirst(7))) else {
                XCTFail("\(cell): the worker said '\(resultLine)'"); failures += 1; continue
            }
            failures += try judge(cell, result, observed: observed, fixture: fixture, process: "another process")
        }
        print(render("another process"))
        XCTAssertEqual(failures, 0)
    }

    /// The interleaving of defect 5, one case spelled out: a `complete` file is opened, its key unwrapped, and `lock`
    /// starts before the handle holding the key is registered. `lock` must wait for the registration, wipe the handle
    /// and only then return; the read then fails `.locked` and no handle is left. Before this change the handle was
    /// registered after the key's acquisition with no gate between them and the lock, so `lock` returned while the
    /// opener still held the key (`lockingInsideTheCall` reports "lock returned while …").
    func testLockDuringAnOpenWaitsAndWipesTheNewHandle() throws {
        let domain = try makeDomain(store: .inProcess, at: "interleave")
        let path = root + "/interleave-a"
        try domain.files.write(Array(repeating: 7, count: 9000), to: path, protection: .complete)
        let result = try lockingInsideTheCall(domain) { CellResult { try domain.files.read(path) } }
        XCTAssertEqual(result.outcome, .locked, "\(result.line)")
        XCTAssertEqual(domain.liveLock.openHandleCount, 0)
    }

    // MARK: - Cells and judging

    static let cells: [MatrixCell] = ProtectedDataEntryPoint.allCases.flatMap { e in
        ProtectionClass.allCases.flatMap { c in LockTiming.allCases.map { MatrixCell(e, c, $0) } }
    }

    /// Checks one cell's result and its files; records the cell for the table; returns 1 when it is wrong.
    private func judge(_ cell: MatrixCell, _ result: CellResult, observed: Set<ProtectedDataEntryPoint>, fixture: MatrixFixture, process: String) throws -> Int {
        if cell.timing != .unlocked { try unlock(fixture.domain) }
        var problems: [String] = []
        if observed != [cell.entry] { problems.append("the driver reached \(observed.map(\.description).sorted()), not \(cell.entry)") }
        switch result.outcome {
        case nil: problems.append("failed with an error other than .locked: \(result.line.prefix(300))")
        case let got? where got != cell.expected: problems.append("\(got.rawValue), but the class table says \(cell.expected.rawValue): \(result.line.prefix(300))")
        default: break
        }
        let read: [UInt8]? = if case .worked(let r) = result { r } else { nil }
        if let wrong = try fixture.verify(cell, result.outcome ?? .locked, read: read) { problems.append(wrong) }
        table[process, default: [:]][cell.name] = problems.isEmpty ? (cell.expected == .works ? "✓" : "L") : "✗"
        for p in problems { XCTFail("\(process): \(cell): \(p)") }
        return problems.isEmpty ? 0 : 1
    }

    /// The matrix as a table: a row per entry point, a column per class and timing (✓ works, L fails `.locked`, ✗ wrong).
    private func render(_ process: String) -> String {
        let t = table[process] ?? [:]
        var out = "guarantee matrix, \(process): \(Self.cells.count) cells, \(t.values.count { $0 == "✗" }) wrong (✓ works, L fails .locked, ✗ wrong)\n"
        out += "| entry point | " + ProtectionClass.allCases.map { c in LockTiming.allCases.map { "\(c.name) \($0.rawValue)" }.joined(separator: " | ") }.joined(separator: " | ") + " |\n"
        out += "|---|" + String(repeating: "---|", count: ProtectionClass.allCases.count * LockTiming.allCases.count) + "\n"
        for e in ProtectedDataEntryPoint.allCases {
            out += "| `\(e)` | " + ProtectionClass.allCases.flatMap { c in LockTiming.allCases.map { t[MatrixCell(e, c, $0).name] ?? "?" } }.joined(separator: " | ") + " |\n"
        }
        return out
    }

    // MARK: - Locking

    private let passphrase = "correct horse"

    private func makeDomain(store: KeyStore, at name: String) throws -> ProtectionDomain {
        let loc = DomainLocation(home: root + "/\(name)-home", deviceDirectory: root + "/\(name)-devices")
        let d = try ProtectionDomain.create(at: loc, passphrase: try secret(passphrase), kdf: .minimumForTests, keyStore: store) { _ in }
        try d.unlock(passphrase: try secret(passphrase))
        return d
    }

    private func lock(_ domain: ProtectionDomain, _ cell: MatrixCell) throws {
        let report = try domain.lock(grace: .zero)
        XCTAssertEqual(report.processesTimedOut, 0, "\(cell): a process did not acknowledge the lock in time")
    }

    private func unlock(_ domain: ProtectionDomain) throws { try domain.unlock(passphrase: try secret(passphrase)) }

    /// Runs `call`; the first time it has obtained a key (`AdmissionProbe`), starts `lock` on another thread and
    /// waits until that lock waits for this acquisition, then lets the call go on. Joins the lock afterwards.
    ///
    /// If the lock returns instead while the call still holds its key outside the registry, that is the defect:
    /// reported as a failure.
    private func lockingInsideTheCall(_ domain: ProtectionDomain, _ call: () -> CellResult) throws -> CellResult {
        let started = Atomic<Bool>(false), returned = Atomic<Bool>(false)
        let done = DispatchSemaphore(value: 0)
        let failure = Locked<String?>(nil)
        let result = AdmissionProbe.with({ c in
            guard !started.exchange(true, ordering: .relaxed) else { return }
            Thread.detachNewThread {
                do {
                    let report = try domain.lock(grace: .zero)
                    if report.processesTimedOut != 0 { failure.withLock { $0 = "a process did not acknowledge the lock" } }
                } catch { failure.withLock { $0 = "lock failed: \(error)" } }
                returned.store(true, ordering: .sequentiallyConsistent)
                done.signal()
            }
            // Until the lock waits for this acquisition, or returns without waiting (the defect). Bounded.
            let limit = Date().addingTimeInterval(20)
            while domain.liveLock.revocationsWaiting == 0 && !returned.load(ordering: .sequentiallyConsistent) && Date() < limit { usleep(100) }
            if returned.load(ordering: .sequentiallyConsistent) {
                failure.withLock { $0 = "lock returned while a call still held its \(c.name) key outside the registry" }
            } else if domain.liveLock.revocationsWaiting == 0 {
                failure.withLock { $0 = "the lock never reached its revocation" }
            }
        }, call)
        if started.load(ordering: .relaxed) { done.wait() }
        if let f = failure.withLock({ $0 }) { XCTFail(f) }
        return result
    }
}

/// A running guarantee-worker: lines from its standard output, lines to its standard input.
private final class WorkerProcess {
    let process = Process()
    let input = Pipe(), output = Pipe(), errors = Pipe()
    var buffer: [UInt8] = []

    init(_ path: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "DATAPROTECTION_HOME")
        process.environment = env
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
    }

    /// The next line of standard output ("" at its end).
    func line() throws -> String {
        while true {
            if let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                defer { buffer.removeSubrange(...nl) }
                return String(decoding: buffer[..<nl], as: UTF8.self)
            }
            let more = output.fileHandleForReading.availableData
            if more.isEmpty { defer { buffer = [] }; return String(decoding: buffer, as: UTF8.self) }
            buffer += more
        }
    }

    func send(_ s: String) throws { try input.fileHandleForWriting.write(contentsOf: Data((s + "\n").utf8)) }

    /// Waits for the process to exit; returns its standard error.
    func finish() -> String {
        try? input.fileHandleForWriting.close()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: err, as: UTF8.self)
    }
}
