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
    /// Every readable mapping of process `pid`, read through /proc/PID/mem (root, or ptrace rights, needed).
    func memory(of pid: Int32) throws -> [[UInt8]] {
        // /proc files report size 0, and String(contentsOfFile:) stops early on them: read to the end.
        let maps = String(decoding: try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(pid)/maps")).readToEnd() ?? Data(), as: UTF8.self)
        let fd = open("/proc/\(pid)/mem", O_RDONLY)
        guard fd >= 0 else { throw XCTSkip("cannot read /proc/\(pid)/mem (errno \(errno)): this test needs root or ptrace rights") }
        defer { close(fd) }
        var regions: [[UInt8]] = []
        for line in maps.split(separator: "\n") {
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            guard f.count >= 2, f[1].hasPrefix("r"), !line.contains("[vvar]"), !line.contains("[vsyscall]") else { continue }
            let range = f[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
            // Sanitizer builds (scripts/test) map gigabytes to terabytes of shadow and allocator space: reading it
            // would exhaust memory and outlast the workers, and it holds sanitizer metadata, not the process's data.
            // No mapping of a worker's own is that large.
            guard range.count == 2, range[1] - range[0] < 1 << 30 else { continue }
            var start = range[0]
            while start < range[1] {  // 1 MiB at a time; unreadable pages are skipped
                let n = Int(min(1 << 20, range[1] - start))
                var buf = [UInt8](repeating: 0, count: n)
                let got = buf.withUnsafeMutableBytes { pread(fd, $0.baseAddress, n, off_t(Int64(bitPattern: start))) }
                if got > 0 { regions.append(Array(buf[0..<got])) }
                start += UInt64(n)
            }
        }
        return regions
    }

    /// Which of `needles` occur anywhere in `regions` (indexed by their first 8 bytes).
    func find(_ needles: [(String, [UInt8])], in regions: [[UInt8]]) -> Set<String> {
        var byPrefix: [UInt64: [(String, [UInt8])]] = [:]
        for n in needles { byPrefix[n.1.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }, default: []].append(n) }
        var found = Set<String>()
        for r in regions where r.count >= 32 {
            r.withUnsafeBytes { b in
                for i in 0...(b.count - 32) {
                    guard let cands = byPrefix[b.loadUnaligned(fromByteOffset: i, as: UInt64.self)] else { continue }
                    for (what, key) in cands where memcmp(b.baseAddress! + i, key, key.count) == 0 { found.insert(what) }
                }
            }
        }
        return found
    }

    /// The AES-256 keys that chunks of the protected file at `path` are sealed under: its content key (AES-256-GCM with
    /// direct nonces) or the subkey of each chunk's key nonce (extended nonces, FORMAT.md §7); none for XChaCha20-Poly1305.
    func aesKeys(of path: String, content: borrowing SecretBytes) throws -> [[UInt8]] {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let header = try FileHeader.parse(Array(bytes[0..<FileHeader.size]))
        let layout = ChunkLayout(headerSize: FileHeader.size, chunkSize: header.chunkSize, overhead: header.cipher.overhead)
        switch header.cipher {
        case .xchacha20poly1305: return []
        case .aes256gcm: return [content.exposedForTest()]
        case .aes256gcmExtended:
            var keys: [[UInt8]] = []
            var offset = Int(layout.offset(ofChunk: 0))
            let keyNonce = UnsafeMutableRawBufferPointer.allocate(byteCount: AEADNonceMode.keyNonceSize, alignment: 1)
            defer { keyNonce.deallocate() }
            while offset + header.cipher.overhead <= bytes.count {
                keyNonce.copyBytes(from: bytes[offset..<offset + AEADNonceMode.keyNonceSize])
                let subkey = try AEADNonceMode.extendedSubkey(of: content, nonce: UnsafeRawBufferPointer(keyNonce)).exposedForTest()
                if !keys.contains(subkey) { keys.append(subkey) }
                offset += layout.stride
            }
            return keys
        }
    }

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
