import Foundation
import DataProtection
// @testable: derives per-file content and header keys (FileKeys) to scan worker memory for them; the class key comes from the domain's package-level key store.
@testable import DataProtectionFiles
import DataProtectionFormat
import ExamplePrograms
import ProtectionCrypto
import Locking
import TestSupport
import XCTest

extension DpctlTestCase {
    /// Starts `count` example services (Examples/BackgroundService) on `work` and waits until each is running.
    func startServices(_ count: Int, work: String, seconds: Int, extra: [String] = []) throws -> [(Process, String)] {
        let service = try builtProduct(ExamplePrograms.service)
        var out: [(Process, String)] = []
        for i in 0..<count {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: service)
            let log = "\(dir)/service-\(i).log", ready = "\(dir)/service-\(i).ready"
            p.arguments = ["--work", work, "--seconds", "\(seconds)", "--log", log, "--ready", ready] + extra
            p.environment = environment
            p.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
            try p.run()
            out.append((p, log))
            XCTAssertTrue(eventually(within: .seconds(30)) { FileManager.default.fileExists(atPath: ready) }, "service \(i) did not start")
        }
        return out
    }

    /// The domain events a service logged: name, the deadline `willLock` named, and the Unix milliseconds it arrived.
    func serviceEvents(_ log: String) throws -> [(event: String, deadline: Int64?, at: Double)] {
        try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").compactMap { line in
            guard let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], let e = o["event"] as? String,
                  let at = (o["at"] as? NSNumber)?.doubleValue else { return nil }
            return (e, (o["deadline"] as? NSNumber)?.int64Value, at)
        }
    }
}

/// Lock while work is running, across real processes: the example service
/// (`Examples/BackgroundService`) works in several processes while `dpctl lock` and
/// `dpctl unlock` run from outside.
final class LiveLockProcessTests: DpctlTestCase {
    struct Op { var op: String, cls: String, file: String, v: Int, start: UInt64, end: UInt64, result: String }

    func monotonicNanos() -> UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }

    /// The service's deterministic contents of version `v` of `name` (Examples/BackgroundService).
    func contents(_ name: String, _ v: Int) -> [UInt8] {
        var b = Array("file=\(name) version=\(v)\n".utf8)
        let n = 1000 + (v * 7919) % 30_000
        let fnv = name.utf8.reduce(UInt32(2_166_136_261)) { ($0 ^ UInt32($1)) &* 16_777_619 }
        var x = UInt32(truncatingIfNeeded: v &* 2_654_435_761) ^ fnv
        for _ in 0..<n { x = x &* 1_103_515_245 &+ 12345; b.append(UInt8(truncatingIfNeeded: x >> 16)) }
        return b
    }

    func parse(_ log: String) throws -> [Op] {
        try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").compactMap { line in
            guard let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], let op = o["op"] as? String else { return nil }
            return Op(op: op, cls: o["class"] as! String, file: o["file"] as! String, v: o["v"] as! Int,
                      start: (o["start"] as! NSNumber).uint64Value, end: (o["end"] as! NSNumber).uint64Value, result: o["result"] as! String)
        }
    }

    /// Several processes and tasks work on files of every class while another process locks
    /// and unlocks many times: every operation succeeds with the right data or fails with
    /// `locked`; no complete-class operation that starts after `lock` returned succeeds;
    /// every file holds its last acknowledged contents; no process crashes.
    func testTortureLockAndUnlockWhileServicesWork() throws {
        _ = try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let work = dir + "/work"
        let services = try startServices(3, work: work, seconds: 120, extra: ["--tasks-per-class", "2"])
        var lockedIntervals: [(UInt64, UInt64)] = []
        let cycles = 12
        for _ in 0..<cycles {
            usleep(150_000)  // let the services work unlocked (workload shape, not synchronisation)
            try ok(["lock"])
            let lockedAt = monotonicNanos()
            usleep(150_000)  // and locked
            let unlockAt = monotonicNanos()
            try ok(["unlock", "--passphrase-file", passphraseFile])
            lockedIntervals.append((lockedAt, unlockAt))
        }
        for (p, _) in services { p.terminate() }
        for (p, _) in services { p.waitUntilExit() }
        var ops = 0, lockedErrors = 0, succeeded = 0, lastAck: [String: Int] = [:]
        for (p, log) in services {
            XCTAssertEqual(p.terminationReason, .exit, "a service crashed")
            XCTAssertEqual(p.terminationStatus, 0, "a service reported a violation or an error (see \(log))")
            for o in try parse(log) {
                ops += 1
                if o.result == "locked" { lockedErrors += 1 }
                XCTAssertTrue(o.result == "ok" || o.result == "locked", "\(o.op) \(o.file): \(o.result)")
                if o.result == "ok" {
                    succeeded += 1
                    if o.cls == "complete" {
                        for (l, u) in lockedIntervals {
                            XCTAssertFalse(o.start > l && o.start < u, "a complete-class \(o.op) of \(o.file) started after lock returned and succeeded")
                        }
                    }
                    if o.op == "write" { lastAck[o.file] = max(lastAck[o.file] ?? 0, o.v) }
                }
            }
        }
        // After the last unlock every document holds its last acknowledged version.
        for (file, v) in lastAck {
            let r = try ok(["cat", "\(work)/\(file)"])
            XCTAssertEqual([UInt8](r.stdout), contents(file, v), "\(file) does not hold its last acknowledged version \(v)")
        }
        XCTAssertGreaterThan(lockedErrors, cycles, "the services never met the lock")
        XCTAssertGreaterThan(lastAck.count, 10)
        print("live-lock torture: \(services.count) processes × 2 tasks per class, \(cycles) lock cycles, \(ops) operations (\(succeeded) ok, \(lockedErrors) locked), \(lastAck.count) files verified, 0 torn files, 0 crashes")
    }
}

/// After `lock` returns, no worker process's memory holds the complete class key, any
/// per-file key of a complete file, or the keys derived from one.
final class KeyResidueTests: DpctlTestCase {
    func testNoKeyOfALockedClassRemainsInAnyWorkerAfterLock() throws {
        _ = try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let work = dir + "/work"
        let service = try builtProduct(ExamplePrograms.service)
        var workers: [Process] = []
        for i in 0..<2 {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: service)
            let ready = "\(dir)/ready-\(i)"
            p.arguments = ["--work", work, "--seconds", "600", "--hold", "20", "--tasks-per-class", "1", "--ready", ready]
            p.environment = environment
            p.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
            try p.run()
            workers.append(p)
            XCTAssertTrue(eventually(within: .seconds(30)) { FileManager.default.fileExists(atPath: ready) })
        }
        defer { for p in workers { p.terminate(); p.waitUntilExit() } }

        // The test door: the class key and every held file's per-file key, plus the keys derived from it.
        let domain = try ProtectionDomain.open(at: DomainLocation(home: home, deviceDirectory: devices), keyStore: .kernel(.session))
        var needles: [(String, [UInt8])] = []
        guard let classKey = try domain.store.secret(.complete, 1) else { return XCTFail("class complete is not in the keyring") }
        needles.append(("class key complete", classKey.exposedForTest()))
        var derived: [(String, [UInt8])] = []
        let held = try FileManager.default.contentsOfDirectory(atPath: work).filter { $0.hasPrefix("held-") }
        XCTAssertEqual(held.count, 40)
        for name in held {
            let fk = try domain.files.perFileKey("\(work)/\(name)")
            needles.append(("per-file key of \(name)", fk.exposedForTest()))
            let content = try KeyDerivation.subkey(of: fk, context: FileKeys.contentContext, id: 1)
            let mac = try KeyDerivation.subkey(of: fk, context: FileKeys.headerContext, id: 1)
            derived.append(("content key of \(name)", content.exposedForTest()))
            derived.append(("header key of \(name)", mac.exposedForTest()))
            for aes in try aesKeys(of: "\(work)/\(name)", content: content) {
                derived.append(("AES round keys 2–3 of \(name)", AESKeySchedule.roundKeys2And3(of: aes)))
            }
        }
        needles += derived

        // Control: before the lock the workers' open handles hold their derived keys, so the scan finds them.
        var before = Set<String>()
        for p in workers { before.formUnion(find(needles, in: try memory(of: p.processIdentifier))) }
        XCTAssertGreaterThan(before.filter { $0.hasPrefix("content key") }.count, 0, "the memory scan cannot see keys that are there")
        XCTAssertGreaterThan(before.filter { $0.hasPrefix("AES round keys") }.count, 0, "the memory scan cannot see the key schedules that are there")
        // Each worker keeps the class key between opens (ClassKeyCache): the lock must wipe that copy too.
        XCTAssertTrue(before.contains("class key complete"), "the workers' cached class key is not seen before the lock: the scan would not notice it staying")

        let r = try ok(["lock"])
        var after = Set<String>()
        for p in workers { after.formUnion(find(needles, in: try memory(of: p.processIdentifier))) }
        XCTAssertEqual(after, [], "key material left in worker memory after lock: \(after.sorted())")
        print("key residue: \(workers.count) workers × 20 held complete handles; \(needles.count) keys sought; \(before.count) found before lock, \(after.count) after; \(r.stderr.trimmingCharacters(in: .whitespacesAndNewlines))")
    }
}

/// Every lock tells running processes `willLock` first and locks at the deadline it names:
/// `dpctl lock` (with or without `--grace`) and the auto-lock of `unlock --timeout`; only `--now` does not.
final class GraceTests: DpctlTestCase {
    /// Checks a process's events: exactly one `willLock` then one `didLock`, the lock not before the deadline the warning named.
    func assertWarnedOnceThenLocked(_ events: [(event: String, deadline: Int64?, at: Double)], _ who: String, deadline expected: Int64? = nil,
                                    warnedNotBefore: Int64? = nil, file: StaticString = #filePath, line: UInt = #line) {
        guard events.map(\.event) == ["willLock", "didLock"], let deadline = events[0].deadline else {
            return XCTFail("\(who): expected willLock(deadline) then didLock, got \(events.map(\.event))", file: file, line: line)
        }
        if let expected { XCTAssertEqual(deadline, expected, "\(who): willLock names another deadline", file: file, line: line) }
        XCTAssertGreaterThanOrEqual(events[1].at, Double(deadline), "\(who): didLock came \(Double(deadline) - events[1].at) ms before the deadline willLock named", file: file, line: line)
        if let warnedNotBefore { XCTAssertGreaterThanOrEqual(events[0].at, Double(warnedNotBefore), "\(who): willLock came before deadline − grace", file: file, line: line) }
    }

    /// A plain `dpctl lock` warns another process (the example service) with a deadline, then locks at it.
    func testPlainLockWarnsAnotherProcessBeforeLocking() throws {
        _ = try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let (service, log) = try startServices(1, work: dir + "/work", seconds: 120, extra: ["--tasks-per-class", "0"])[0]
        defer { service.terminate(); service.waitUntilExit() }
        let r = try ok(["lock"])  // returns once every listener has handled didLock (the service logs it before acknowledging)
        let events = try serviceEvents(log)
        assertWarnedOnceThenLocked(events, "the service")
        XCTAssertTrue(r.stderr.contains("willLock"), r.stderr)
        XCTAssertEqual(try unlocked(), [false, false, true, true])
        if events.count == 2, let d = events[0].deadline {
            print("dpctl lock: the service got willLock \(String(format: "%.0f", Double(d) - events[0].at)) ms before the deadline and didLock \(String(format: "%.1f", events[1].at - Double(d))) ms after it")
        }
    }

    /// `dpctl lock --now` locks at once: no `willLock` reaches another process, only `didLock`.
    func testLockNowSendsNoWarning() throws {
        _ = try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let (service, log) = try startServices(1, work: dir + "/work", seconds: 120, extra: ["--tasks-per-class", "0"])[0]
        defer { service.terminate(); service.waitUntilExit() }
        try ok(["lock", "--now"])
        XCTAssertEqual(try serviceEvents(log).map(\.event), ["didLock"])
        XCTAssertEqual(try unlocked(), [false, false, true, true])
        let both = try dpctl(["lock", "--now", "--grace", "1s"])
        XCTAssertEqual(both.status, 64, both.stderr)
    }

    /// The auto-lock of `unlock --timeout` warns every attached process once, at deadline − grace, with the
    /// deadline, and each gets `didLock` at the deadline: the example service and this test process.
    func testAutoLockWarnsEveryProcessOnceThenLocksAtTheDeadline() throws {
        _ = try initDomain()
        let domain = try ProtectionDomain.open(at: DomainLocation(home: home, deviceDirectory: devices), keyStore: .kernel(.session))
        let mine = Locked<[(event: String, deadline: Int64?, at: Double)]>([])
        let subscription = domain.liveLock.onEvent { e in
            let at = Date().timeIntervalSince1970 * 1000
            switch e {
            case .willLock(let d): mine.withLock { $0.append(("willLock", d, at)) }
            case .didLock: mine.withLock { $0.append(("didLock", nil, at)) }
            case .didUnlock: break
            }
        }
        defer { subscription.cancel() }
        let (service, log) = try startServices(1, work: dir + "/work", seconds: 120, extra: ["--tasks-per-class", "0"])[0]
        defer { service.terminate(); service.waitUntilExit() }
        try ok(["unlock", "--passphrase-file", passphraseFile, "--timeout", "2", "--grace", "1s"])
        let deadline = try XCTUnwrap(domain.liveLock.autoLockDeadlineUnixMillis)
        func locked(_ events: [(event: String, deadline: Int64?, at: Double)]) -> Bool { events.contains { $0.event == "didLock" } }
        XCTAssertTrue(try eventually(within: .seconds(15)) { try locked(mine.withLock { $0 }) && locked(serviceEvents(log)) }, "no didLock")
        let theirs = try serviceEvents(log).filter { $0.event != "didUnlock" }
        assertWarnedOnceThenLocked(theirs, "the service", deadline: deadline, warnedNotBefore: deadline - 1000)
        assertWarnedOnceThenLocked(mine.withLock { $0 }, "the test process", deadline: deadline, warnedNotBefore: deadline - 1000)
        XCTAssertFalse(domain.liveLock.isProtectedDataAvailable)
        XCTAssertEqual(try unlocked(), [false, false, true, true])
        XCTAssertEqual(try dpctl(["unlock", "--passphrase-file", passphraseFile, "--grace", "1s"]).status, 64, "--grace without --timeout")
        if theirs.count == 2, let d = theirs[0].deadline {
            print("auto-lock: the service got willLock \(String(format: "%.0f", Double(d) - theirs[0].at)) ms before the deadline (grace 1000 ms) and didLock \(String(format: "%.1f", theirs[1].at - Double(d))) ms after it")
        }
    }

    // Synchronous on purpose: the session keyring joined in setUp belongs to this thread,
    // and the dpctl children must inherit it.
    func testGraceSendsWillLockThenLocksAtTheDeadline() throws {
        _ = try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let domain = try ProtectionDomain.open(at: DomainLocation(home: home, deviceDirectory: devices), keyStore: .kernel(.session))
        let events = Locked<[(DomainEvent, Date)]>([])
        let subscription = domain.liveLock.onEvent { e in events.withLock { $0.append((e, Date())) } }
        defer { subscription.cancel() }
        let started = Date()
        let locker = Process()  // started, not awaited: its events arrive while it runs
        locker.executableURL = URL(fileURLWithPath: dpctlPath)
        locker.arguments = ["lock", "--grace", "1"]
        locker.environment = environment
        try locker.run()
        XCTAssertTrue(eventually(within: .seconds(10)) { events.withLock { $0.contains { if case .didLock = $0.0 { true } else { false } } } })
        let seen = events.withLock { $0 }
        locker.waitUntilExit()
        XCTAssertEqual(locker.terminationStatus, 0)
        guard seen.count == 2, case .willLock(let deadline) = seen[0].0, case .didLock(let classes) = seen[1].0 else {
            return XCTFail("expected willLock then didLock, got \(seen.map { $0.0 })")
        }
        XCTAssertEqual(classes, LiveLock.lockClasses)
        let deadlineDate = Date(timeIntervalSince1970: Double(deadline) / 1000)
        XCTAssertGreaterThanOrEqual(seen[1].1.timeIntervalSince(deadlineDate), -0.05, "locked before the announced deadline")
        XCTAssertGreaterThanOrEqual(seen[1].1.timeIntervalSince(started), 0.9, "the grace period was not honoured")
        XCTAssertFalse(domain.liveLock.isProtectedDataAvailable)
        XCTAssertEqual(try unlocked(), [false, false, true, true])
    }
}
