import Foundation
import DataProtection
// @testable: builds ClassKeys over an internal InMemoryKeyTable revoked by a LiveLock, as a domain does.
@testable import DataProtectionKeys
import ProtectionCrypto
import Locking
import Synchronization
import SystemLayer
import XCTest

/// The live lock within one process: two `LiveLock`s on one domain each have their
/// own listener socket and thread, exactly as two processes would.
final class LiveLockTests: XCTestCase {
    func makeDomain() throws -> (dir: String, runtime: String, id: String) {
        let dir = try temporaryDirectory(self)
        let runtime = dir + "/run"
        return (dir, runtime, "test\(UInt32.random(in: 0...UInt32.max))")
    }

    /// Class keys in a table, revoked by `live` as a domain's keys are (the table stands in for the keyring: `drop`
    /// removes the secret halves as a lock removes them from the keyring, `install` puts them back as unlock does).
    struct LiveKeys {
        let keys: ClassKeys
        let table: InMemoryKeyTable
        /// The keys "installed" by an unlock before the test began: the table holds them and the shared page says
        /// unlocked (marked without a `didUnlock` event, so the tests' event logs start empty).
        init(_ list: [ClassKey], _ live: LiveLock) {
            table = InMemoryKeyTable(list)
            keys = ClassKeys(provider: table, revocation: live.revocation)
            live.state.unlock(LiveState.bootLocked)
        }
        func drop() { table.revoke { LiveLock.lockClasses.contains($0) } }
        func install(_ list: [ClassKey]) { table.install(list) }
    }

    func testOpenHandlesObserveLockPerClassAndResumeAfterUnlock() throws {
        let (dir, runtime, id) = try makeDomain()
        let keyList = try ProtectionClass.allCases.map { try ClassKey.generate($0) }
        let attachment = try LiveLock(domainID: id, runtimeDirectory: runtime)
        let keys = LiveKeys(keyList, attachment)
        let worker = ProtectedFiles(keys: keys.keys)
        let locker = try LiveLock(domainID: id, runtimeDirectory: runtime)  // "another process"
        var handles: [ProtectionClass: ProtectedFileHandle] = [:]
        for c in ProtectionClass.allCases {
            let h = try worker.create("\(dir)/\(c.name)", protection: c)
            try h.write(Array(repeating: c.rawValue, count: 5000), at: 0)
            handles[c] = h
        }
        XCTAssertEqual(attachment.openHandleCount, 4)
        let report = try locker.lock { keys.drop() }
        XCTAssertEqual(report.processesAcknowledged, 2)  // both listeners answered before lock returned
        // complete: fails at once, keys gone; the others keep working.
        assertProtectionError([.locked]) { _ = try handles[.complete]!.read(at: 0, count: 1) }
        assertProtectionError([.locked]) { try handles[.complete]!.write([1], at: 0) }
        XCTAssertEqual(try handles[.completeUnlessOpen]!.read(at: 0, count: 2), [2, 2])
        try handles[.completeUnlessOpen]!.append([9])
        XCTAssertEqual(try handles[.completeUntilFirstUserAuthentication]!.read(at: 0, count: 1), [3])
        XCTAssertEqual(try handles[.none]!.read(at: 4999, count: 1), [4])
        // Opening existing A/B files fails; creating B succeeds.
        assertProtectionError([.locked]) { _ = try worker.open("\(dir)/complete") }
        assertProtectionError([.locked]) { _ = try worker.open("\(dir)/completeUnlessOpen") }
        let created = try worker.create("\(dir)/new-b", protection: .completeUnlessOpen)
        try created.write([5, 5, 5], at: 0)
        created.close()
        XCTAssertFalse(locker.isProtectedDataAvailable)
        // Unlock: the same complete handle works again (its key is unwrapped anew).
        keys.install(keyList)
        locker.unlock()
        XCTAssertTrue(locker.isProtectedDataAvailable)
        XCTAssertEqual(try handles[.complete]!.read(at: 0, count: 2), [1, 1])
        XCTAssertEqual(try worker.read("\(dir)/new-b"), [5, 5, 5])
        for h in handles.values { h.close() }
        XCTAssertEqual(attachment.openHandleCount, 0)
    }

    func testLockWaitsForAnOperationInFlight() throws {
        let (dir, runtime, id) = try makeDomain()
        let keyList = try ProtectionClass.allCases.map { try ClassKey.generate($0) }
        let attachment = try LiveLock(domainID: id, runtimeDirectory: runtime)
        let keys = LiveKeys(keyList, attachment)
        let worker = ProtectedFiles(keys: keys.keys)
        let locker = try LiveLock(domainID: id, runtimeDirectory: runtime)
        let h = try worker.create("\(dir)/big", protection: .complete)
        let data = [UInt8](repeating: 7, count: 256 << 20)
        let result = Locked<Result<Void, ProtectionError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do { try h.write(data, at: 0); result.withLock { $0 = .success(()) } } catch { result.withLock { $0 = .failure(error as! ProtectionError) } }
            done.signal()
        }
        // Wait (bounded) until the write is visibly under way: chunks are reaching the file.
        let limit = Date().addingTimeInterval(10)
        while (try FileManager.default.attributesOfItem(atPath: "\(dir)/big")[.size] as? Int ?? 0) < (1 << 20) && Date() < limit { usleep(200) }
        // The acknowledgement timeout (2 s by default, after which lock reports the process as not answering) is raised:
        // a 256 MiB write under a sanitizer, with another sanitized suite on the same two cores, takes longer than that.
        let report = try locker.lock(grace: .zero, timeoutMillis: 120_000) { keys.drop() }
        XCTAssertEqual(report.processesTimedOut, 0)
        // The write was in flight, so lock waited for it: when lock returns, every chunk is on disk.
        let onDiskAtLock = try FileManager.default.attributesOfItem(atPath: "\(dir)/big")[.size] as? Int ?? 0
        let layout = h.layout
        XCTAssertEqual(Int64(onDiskAtLock), layout.fileSize(forPlaintextSize: Int64(data.count)), "lock returned before the in-flight write finished")
        done.wait()
        keys.install(keyList)
        locker.unlock()
        guard case .success? = result.withLock({ $0 }) else { return XCTFail("the in-flight write failed") }
        XCTAssertEqual(try h.size, Int64(data.count))
        XCTAssertEqual(try h.read(at: Int64(data.count) - 3, count: 3), [7, 7, 7])
        // And an operation after lock returned fails whole.
        _ = try locker.lock { keys.drop() }
        assertProtectionError([.locked]) { try h.write([1, 2, 3], at: 0) }
        keys.install(keyList)
        locker.unlock()
        XCTAssertEqual(try h.read(at: 0, count: 3), [7, 7, 7])
        h.close()
    }

    func testEventsReachOtherAttachmentsInOrder() async throws {
        let (_, runtime, id) = try makeDomain()
        let observer = try LiveLock(domainID: id, runtimeDirectory: runtime)
        let locker = try LiveLock(domainID: id, runtimeDirectory: runtime)
        let seen = Locked<[DomainEvent]>([])
        let callback = observer.onEvent { e in seen.withLock { $0.append(e) } }
        let stream = observer.events()
        let report = try locker.lock(grace: .milliseconds(50)) { }
        locker.unlock()
        var got: [DomainEvent] = []
        for await e in stream {
            got.append(e)
            if got.count == 3 { break }
        }
        let deadline = try XCTUnwrap(report.warnedDeadlineUnixMillis)
        XCTAssertEqual(got, [.willLock(deadlineUnixMillis: deadline), .didLock(LiveLock.lockClasses), .didUnlock])
        // The callback is a second delivery of the same events, not ordered with the stream's: wait (up to 10 s) for
        // its third before comparing (comparing at once failed when the stream was served first).
        let until = ContinuousClock.now.advanced(by: .seconds(10))
        while seen.withLock({ $0.count }) < got.count, ContinuousClock.now < until { try await Task.sleep(for: .milliseconds(1)) }
        XCTAssertEqual(seen.withLock { $0 }, got)
        callback.cancel()
    }

    /// Each attachment's events with the Unix milliseconds (precise clock) at which they arrived.
    final class EventLog: Sendable {
        let events = Locked<[(event: DomainEvent, at: Double)]>([])
        let subscriptions: [EventSubscription]
        init(_ lives: [LiveLock]) {
            let events = self.events
            subscriptions = lives.map { live in live.onEvent { e in events.withLock { $0.append((e, Date().timeIntervalSince1970 * 1000)) } } }
        }
        var list: [(event: DomainEvent, at: Double)] { events.withLock { $0 } }
    }

    /// Checks that `log` holds exactly one `willLock` and then one `didLock`, the lock not before the deadline the warning named.
    func assertWarnedOnceThenLocked(_ log: [(event: DomainEvent, at: Double)], _ who: String, deadline expected: Int64? = nil, warnedNotBefore: Int64? = nil) {
        guard log.count == 2, case .willLock(let deadline) = log[0].event, case .didLock(let classes) = log[1].event else {
            return XCTFail("\(who): expected willLock then didLock, got \(log.map(\.event))")
        }
        if let expected { XCTAssertEqual(deadline, expected, "\(who): willLock names another deadline") }
        XCTAssertEqual(classes, LiveLock.lockClasses)
        XCTAssertGreaterThanOrEqual(log[1].at, Double(deadline), "\(who): didLock arrived \(Double(deadline) - log[1].at) ms before the deadline willLock announced")
        if let warnedNotBefore { XCTAssertGreaterThanOrEqual(log[0].at, Double(warnedNotBefore), "\(who): willLock came before deadline − grace") }
    }

    /// A lock with no grace named warns every attachment (the locker's included) once, with the default grace, before it locks.
    func testEveryLockWarnsEveryAttachmentOnceBeforeLocking() throws {
        let (_, runtime, id) = try makeDomain()
        let lives = try (0..<3).map { _ in try LiveLock(domainID: id, runtimeDirectory: runtime) }
        let logs = lives.map { EventLog([$0]) }
        let started = unixMillis()
        _ = try lives[2].lock { }  // lock returns once every listener has handled didLock: no waiting needed
        for (i, log) in logs.enumerated() { assertWarnedOnceThenLocked(log.list, i == 2 ? "the locker itself" : "observer \(i)") }
        if case .willLock(let deadline)? = logs[0].list.first?.event {
            XCTAssertEqual(Double(deadline - started), Double(LiveLock.milliseconds(LiveLock.defaultGrace)), accuracy: 20, "default grace")
        }
    }

    /// `lock(grace: .zero)` is the one way to lock without a warning: no `willLock` at all.
    func testLockWithZeroGraceSendsNoWarning() throws {
        let (_, runtime, id) = try makeDomain()
        let observer = try LiveLock(domainID: id, runtimeDirectory: runtime)
        let locker = try LiveLock(domainID: id, runtimeDirectory: runtime)
        let log = EventLog([observer])
        let report = try locker.lock(grace: .zero) { }
        XCTAssertNil(report.warnedDeadlineUnixMillis)
        XCTAssertEqual(log.list.map(\.event), [.didLock(LiveLock.lockClasses)])
    }

    /// The auto-lock warns every attachment exactly once at deadline − grace, and every attachment gets
    /// `didLock` at the deadline (one process sends both; none sends twice).
    func testAutoLockWarnsEveryAttachmentOnceThenLocksEveryoneAtTheDeadline() throws {
        let (dir, runtime, id) = try makeDomain()
        let lives = try (0..<3).map { _ in try LiveLock(domainID: id, runtimeDirectory: runtime) }
        let logs = lives.map { EventLog([$0]) }
        let keys = LiveKeys(try ProtectionClass.allCases.map { try ClassKey.generate($0) }, lives[1])
        let files = ProtectedFiles(keys: keys.keys)
        let h = try files.create("\(dir)/a", protection: .complete)
        try h.write([1], at: 0)
        lives[0].unlock(autoLockAfterSeconds: 1)  // the default grace: willLock 500 ms before
        let deadline = try XCTUnwrap(lives[0].autoLockDeadlineUnixMillis)
        let grace = LiveLock.milliseconds(LiveLock.defaultGrace)
        // Bounded wait for the condition (not a sleep standing in for synchronisation).
        let limit = Date().addingTimeInterval(10)
        while logs.contains(where: { !$0.list.contains { if case .didLock = $0.event { true } else { false } } }) && Date() < limit { usleep(10_000) }
        for (i, log) in logs.enumerated() {
            let events = log.list
            XCTAssertEqual(events.first?.event, .didUnlock)
            assertWarnedOnceThenLocked(Array(events.dropFirst()), "attachment \(i)", deadline: deadline, warnedNotBefore: deadline - grace)
        }
        XCTAssertTrue(lives[2].isLocked(.complete))
        assertProtectionError([.locked]) { _ = try h.read(at: 0, count: 1) }
        h.close()
        let arrivals = logs.map { $0.list.dropFirst().map { String(format: "%+.0f", $0.at - Double(deadline)) }.joined(separator: " then ") }
        print("auto-lock: 3 attachments; each got willLock then didLock at deadline \(arrivals.joined(separator: ", ")) ms")
    }

    func testRetryAfterUnlockResumesTheJob() async throws {
        let (dir, runtime, id) = try makeDomain()
        let keyList = try ProtectionClass.allCases.map { try ClassKey.generate($0) }
        let live = try LiveLock(domainID: id, runtimeDirectory: runtime)
        let keys = LiveKeys(keyList, live)
        let files = ProtectedFiles(keys: keys.keys)
        try files.write([1, 2, 3], to: "\(dir)/a", protection: .complete)
        _ = try live.lock { keys.drop() }
        let failures = Atomic<Int>(0)
        let job = Task {
            try await live.retryAfterUnlock {
                do { return try files.read("\(dir)/a") } catch {
                    failures.add(1, ordering: .relaxed)
                    throw error
                }
            }
        }
        // Unlock only once the job has failed cleanly at least once.
        while failures.load(ordering: .relaxed) == 0 { await Task.yield() }
        keys.install(keyList)
        live.unlock()
        let value = try await job.value
        XCTAssertEqual(value, [1, 2, 3])
        XCTAssertGreaterThanOrEqual(failures.load(ordering: .relaxed), 1)
    }

    func testAutoLockDeadlineLocksWithoutAnyMessage() throws {
        let (dir, runtime, id) = try makeDomain()
        let live = try LiveLock(domainID: id, runtimeDirectory: runtime)
        let keys = LiveKeys(try ProtectionClass.allCases.map { try ClassKey.generate($0) }, live)
        let files = ProtectedFiles(keys: keys.keys)
        let h = try files.create("\(dir)/a", protection: .complete)
        live.unlock(autoLockAfterSeconds: 1)
        XCTAssertNotNil(live.autoLockDeadlineUnixMillis)
        try h.write([1], at: 0)
        // Poll (bounded) until the deadline passes; no lock call is made by anyone.
        let limit = Date().addingTimeInterval(5)
        while !live.isLocked(.complete) && Date() < limit { usleep(20_000) }
        XCTAssertTrue(live.isLocked(.complete))
        assertProtectionError([.locked]) { _ = try h.read(at: 0, count: 1) }
        h.close()
    }

    /// A process that claimed an auto-lock's warning and died before locking (simulated: the claim is made in the
    /// shared page and no sequence runs): another listener locks after the deadline, and every attachment gets one didLock.
    func testAutoLockIsTakenOverWhenTheWarningProcessDied() throws {
        let (_, runtime, id) = try makeDomain()
        let lives = try (0..<2).map { _ in try LiveLock(domainID: id, runtimeDirectory: runtime) }
        let logs = lives.map { EventLog([$0]) }
        let deadline = unixMillis() + 300
        lives[0].state.setAutoLock(deadline: deadline, graceMillis: 100)
        XCTAssertTrue(lives[0].state.claimWarning(deadline))  // the "dead" process's claim: nobody will send willLock
        let limit = Date().addingTimeInterval(10)
        while logs.contains(where: { $0.list.isEmpty }) && Date() < limit { usleep(10_000) }
        for (i, log) in logs.enumerated() {
            XCTAssertEqual(log.list.map(\.event), [.didLock(LiveLock.lockClasses)], "attachment \(i)")
            XCTAssertGreaterThanOrEqual(log.list.first?.at ?? 0, Double(deadline + LiveLock.takeoverMillis), "attachment \(i): took over early")
        }
        XCTAssertTrue(lives[1].isLocked(.complete))
        XCTAssertEqual(lives[1].autoLockDeadlineUnixMillis, nil)
    }

    func testDeadProcessSocketIsSkipped() throws {
        let (_, runtime, id) = try makeDomain()
        let live = try LiveLock(domainID: id, runtimeDirectory: runtime)
        // A socket file left by a process that died: bound, then closed.
        let stale = "\(live.directory)/999999-1.sock"
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var addr = sockaddr_un(); addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { p in _ = stale.utf8CString.withUnsafeBytes { p.copyMemory(from: $0) } }
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        close(fd)
        let report = try live.lock { }
        XCTAssertEqual(report.staleRemoved, 1)
        XCTAssertEqual(report.processesAcknowledged, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: stale))
        XCTAssertLessThan(report.elapsedMillis, 1000)
    }

    /// A state page an older library left in the runtime directory (another layout: an older version's LiveLock kept its
    /// lock state at `<domain>/state`, magic at byte 0) is ignored, not misread as "not a lock-state page": the page's
    /// file name carries its layout's version. Before the name did, such a page made every LiveLock of the domain fail.
    func testAStatePageOfAnotherLayoutIsIgnored() throws {
        let (_, runtime, id) = try makeDomain()
        let dir = "\(runtime)/\(id)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(dir)/state", contents: Data(repeating: 0xA5, count: 4096), attributes: [.posixPermissions: 0o600]))
        let live = try LiveLock(domainID: id, runtimeDirectory: runtime)
        let report = try live.lock { }
        XCTAssertEqual(report.processesAcknowledged, 1)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: "\(dir)/state")), Data(repeating: 0xA5, count: 4096), "the other layout's page is left alone")
    }

    /// A symbolic link or a hard link planted at the state page's name is refused before the page is resized, mapped
    /// or written (the page opens through the one safe open): the victim file keeps its bytes, and the error names the
    /// page and the fix. Before, the link was followed, and the victim was grown to a page and written.
    func testALinkPlantedAtTheStatePageIsRefused() throws {
        let (_, runtime, id) = try makeDomain()
        let dir = "\(runtime)/\(id)", victim = "\(runtime)/victim"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let bytes = Data("the victim's own bytes\n".utf8)
        for plant in ["symbolic", "hard"] {
            XCTAssertTrue(FileManager.default.createFile(atPath: victim, contents: bytes, attributes: [.posixPermissions: 0o600]))
            let page = "\(dir)/\(RendezvousDirectory.pageName)"
            if plant == "symbolic" { XCTAssertEqual(symlink(victim, page), 0) } else { XCTAssertEqual(link(victim, page), 0) }
            XCTAssertThrowsError(try LiveLock(domainID: id, runtimeDirectory: runtime), plant) { error in
                let e = error as? ProtectionError
                XCTAssertEqual(e?.path, page, plant)
                XCTAssertTrue(e?.message.contains("remove it") == true, "\(plant): \(e?.message ?? "")")
            }
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: victim)), bytes, "\(plant): the victim is untouched")
            XCTAssertEqual(unlink(page), 0)
            XCTAssertEqual(unlink(victim), 0)
        }
    }

    /// A fresh state page (a fresh runtime directory: the state after a reboot, before the first unlock) says A, B and C
    /// locked, to every attachment, however many attach at once: `isProtectedDataAvailable` is false, and an open or
    /// create of class A or C is refused `.locked` by the page itself, although the key table holds their keys. `unlock`
    /// makes it true, `lock` false again. Against the old page (zeroed meant "never locked") every check here was
    /// "unlocked" and the first create succeeded.
    func testAFreshPageSaysLockedUntilTheFirstUnlock() throws {
        let (dir, runtime, id) = try makeDomain()
        let racing = Locked<[LiveLock]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            if let l = try? LiveLock(domainID: id, runtimeDirectory: runtime) { racing.withLock { $0.append(l) } }
        }
        let lives = racing.withLock { $0 }
        XCTAssertEqual(lives.count, 8, "an attachment failed while the page was being set up")
        for (i, live) in lives.enumerated() {
            XCTAssertFalse(live.isProtectedDataAvailable, "attachment \(i)")
            for c in ProtectionClass.allCases { XCTAssertEqual(live.isLocked(c), c != .none, "attachment \(i), class \(c)") }
        }
        let table = InMemoryKeyTable(try ProtectionClass.allCases.map { try ClassKey.generate($0) })
        let files = ProtectedFiles(keys: ClassKeys(provider: table, revocation: lives[0].revocation))
        for c in [ProtectionClass.complete, .completeUntilFirstUserAuthentication] {
            assertProtectionError([.locked]) { _ = try files.create("\(dir)/\(c.name)", protection: c) }
            XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/\(c.name)"))
        }
        try files.write([4], to: "\(dir)/none", protection: .none)  // D never locks
        lives[1].unlock()
        XCTAssertTrue(lives.allSatisfy(\.isProtectedDataAvailable))
        try files.write([1], to: "\(dir)/a", protection: .complete)
        _ = try lives[2].lock(grace: .zero) { }
        XCTAssertFalse(lives.contains(where: \.isProtectedDataAvailable))
        let late = try LiveLock(domainID: id, runtimeDirectory: runtime)  // a process attaching later reads the page as it is
        XCTAssertFalse(late.isProtectedDataAvailable)
        XCTAssertFalse(late.isLocked(.completeUntilFirstUserAuthentication), "C was unlocked and a default lock leaves it so")
    }
}
