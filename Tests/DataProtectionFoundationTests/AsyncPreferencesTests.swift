// The async forms of the preferences (`ProtectedUserDefaults.nonblocking`, `Preferences.nonblocking`): the synchronous
// answers through the same entry points, with the store's waits and I/O off the cooperative pool.
import DataProtectionFoundation
@_spi(Testing) import DataProtection  // the testing SPI: the entry points' record
import ProtectionCrypto
import TestSupport
import XCTest

final class AsyncPreferencesTests: FoundationTestCase {
    /// The explicit in-process key store: these async tests lock and unlock on threads that do not share setUp's
    /// session keyring.
    override var keyStore: KeyStore { .inProcess }

    /// The entry points `body` reached.
    func observed(_ body: () async throws -> Void) async rethrows -> Set<ProtectedDataEntryPoint> {
        ProtectedDataEntryPoint.resetObserved()
        try await body()
        return ProtectedDataEntryPoint.observed
    }

    /// Every async getter gives its synchronous form's answer (registered values, conversions, Apple's defaults), reads
    /// go through `preferencesRead` and writes through `preferencesWrite` (so the guarantee matrix's cells cover them),
    /// an async write posts `didChangeNotification` once, and a locked store reads as absent and refuses the write as
    /// the synchronous forms do, losing nothing.
    func testAsyncFormsGiveTheSynchronousAnswersThroughTheSameEntryPoints() async throws {
        let defaults = ProtectedUserDefaults.standard(of: context)
        defaults.register(defaults: ["fallback": 7, "flag": true])
        let changes = TaskCounter()
        let token = context.notificationCenter.addObserver(forName: ProtectedUserDefaults.didChangeNotification, object: defaults, queue: nil) { _ in changes.add() }
        defer { context.notificationCenter.removeObserver(token) }

        var seen = try await observed { try await defaults.nonblocking.write(["a", "b"], forKey: "list") }
        XCTAssertEqual(seen, [.preferencesWrite])
        XCTAssertEqual(changes.now, 1)
        var list: [String]?
        seen = await observed { list = await defaults.nonblocking.array(forKey: "list") as? [String] }
        XCTAssertEqual(seen, [.preferencesRead])
        XCTAssertEqual(list, ["a", "b"])

        let date = Date(timeIntervalSince1970: 1_700_000_000)
        let values: [String: Any] = ["n": 42, "pi": 3.5, "s": "12", "yes": "YES", "bytes": Data([1, 2]), "when": date, "dict": ["k": 1], "home": "/srv/x"]
        for (k, v) in values { await defaults.nonblocking.set(v, forKey: k) }
        for k in Array(values.keys) + ["fallback", "flag", "absent", "list"] {
            let n = defaults.nonblocking
            let (b, i, d, s) = (await n.bool(forKey: k), await n.integer(forKey: k), await n.double(forKey: k), await n.string(forKey: k))
            let (bytes, u, dict) = (await n.data(forKey: k), await n.url(forKey: k), await n.dictionary(forKey: k))
            XCTAssertEqual(b, defaults.bool(forKey: k), k)
            XCTAssertEqual(i, defaults.integer(forKey: k), k)
            XCTAssertEqual(d, defaults.double(forKey: k), k)
            XCTAssertEqual(s, defaults.string(forKey: k), k)
            XCTAssertEqual(bytes, defaults.data(forKey: k), k)
            XCTAssertEqual(u, defaults.url(forKey: k), k)
            XCTAssertEqual(dict.map { NSDictionary(dictionary: $0) }, defaults.dictionary(forKey: k).map { NSDictionary(dictionary: $0) }, k)
        }
        let when = await defaults.nonblocking.object(forKey: "when") as? Date, fallback = await defaults.nonblocking.integer(forKey: "fallback")
        XCTAssertEqual(when, date)
        XCTAssertEqual(fallback, 7)
        let all = await defaults.nonblocking.dictionaryRepresentation()
        XCTAssertEqual(NSDictionary(dictionary: all), NSDictionary(dictionary: defaults.dictionaryRepresentation()))
        await defaults.nonblocking.removeObject(forKey: "n")
        XCTAssertNil(defaults.object(forKey: "n"))
        XCTAssertEqual(changes.now, 2 + values.count)

        // The container's store, directly.
        let store = try context.container.preferences(named: "other")
        seen = try await observed { try await store.nonblocking.set(.integer(3), forKey: "n") }
        XCTAssertEqual(seen, [.preferencesWrite])
        try await store.nonblocking.update { $0["m"] = .string("x") }
        let n = try await store.nonblocking.value(forKey: "n"), both = try await store.nonblocking.dictionaryRepresentation()
        XCTAssertEqual(n, .integer(3))
        XCTAssertEqual(both, ["n": .integer(3), "m": .string("x")])
        try await store.nonblocking.removeValue(forKey: "m")
        XCTAssertEqual(try store.dictionaryRepresentation(), ["n": .integer(3)])

        // Locked (the Preferences directory's class C locks with `evictAll`): absent, refused, nothing lost.
        try domain.lock(evictAll: true, grace: .zero)
        let lockedPi = await defaults.nonblocking.integer(forKey: "pi"), lockedFallback = await defaults.nonblocking.integer(forKey: "fallback")
        XCTAssertEqual(lockedPi, 0)
        XCTAssertEqual(lockedFallback, 7, "the registered value shows while locked")
        do {
            try await defaults.nonblocking.write(1, forKey: "pi")
            XCTFail("a write while locked was accepted")
        } catch let e as CocoaError {
            XCTAssertEqual(e.code, .fileWriteNoPermission)
            XCTAssertEqual(e.protectionError?.code, .locked)
        }
        do {
            _ = try await store.nonblocking.value(forKey: "n")
            XCTFail("a read while locked succeeded")
        } catch let e as ProtectionError {
            XCTAssertEqual(e.code, .locked)
        }
        XCTAssertEqual(changes.now, 2 + values.count, "a refused write posted a change")
        try domain.unlock(passphrase: try SecretBytes(utf8: "pass"))
        let pi = await defaults.nonblocking.double(forKey: "pi")
        XCTAssertEqual(pi, 3.5, "the refused write changed the stored value")
    }

    /// 200 async writes wait for the store's lock, which another thread holds inside a change: a counter task on the same
    /// cooperative pool keeps ticking and short jobs finish meanwhile; none of the writes has finished. Cancelling every
    /// other one then cancels those still queued (they throw `CancellationError` and never save), and the rest save once
    /// the holder lets go: the store then holds exactly the keys of the writes that did not throw.
    func testTwoHundredWritesWaitingOnTheStoreLeaveTheCooperativePoolFree() async throws {
        let defaults = ProtectedUserDefaults.standard(of: context)
        let store = try context.container.preferences(named: "standard")
        try store.set(0, forKey: "seed")
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? store.update { _ in
                held.signal()
                _ = release.wait(timeout: .now() + 60)
            }
        }
        held.wait()
        let finished = TaskCounter()
        let writers = (0..<200).map { i in
            Task {
                try await defaults.nonblocking.write(i, forKey: "k\(i)")
                finished.add()
            }
        }
        async let probe = CooperativePoolProbe.hops()
        let jobs = ProcessInfo.processInfo.activeProcessorCount * 2
        let done = await withTaskGroup(of: Int.self) { group in
            for j in 0..<jobs { group.addTask { (0..<100_000).reduce(j, &+) } }
            var n = 0
            for await _ in group { n += 1 }
            return n
        }
        let (hops, took) = try await probe
        XCTAssertEqual(finished.now, 0, "a write finished while the store was held")
        XCTAssertEqual(done, jobs)
        // A blocked pool (2 threads here) hops never while the store is held, and the holder holds until released below.
        XCTAssertEqual(hops, 50, "the cooperative pool stalled while 200 writes waited")

        for (i, w) in writers.enumerated() where i % 2 == 0 { w.cancel() }
        release.signal()
        var saved: Set<String> = [], cancelled = 0
        for (i, w) in writers.enumerated() {
            do { try await w.value; saved.insert("k\(i)") } catch is CancellationError { cancelled += 1 }
        }
        XCTAssertGreaterThan(cancelled, 0, "no queued write was cancelled")
        XCTAssertEqual(cancelled + saved.count, 200)
        let stored = try store.dictionaryRepresentation()
        XCTAssertEqual(Set(stored.keys).subtracting(["seed"]), saved, "a cancelled write saved, or a finished one is missing")
        for key in saved {
            let v = await defaults.nonblocking.integer(forKey: key)
            XCTAssertEqual(v, Int(key.dropFirst())!, key)
        }
        print("200 async preference writes on a held store: the pool made \(hops) hops in \(took), \(done) other jobs finished; "
            + "after cancelling every other one, \(cancelled) never started and \(saved.count) saved")
    }

    /// The control: the same waits through the synchronous `set(_:forKey:)`, called from tasks, take every cooperative
    /// thread, so the counter does not tick until the holder lets go on its own (after 500 ms): the measure above can fail.
    func testSynchronousWritesInTasksStallTheCounterControl() async throws {
        let defaults = ProtectedUserDefaults.standard(of: context)
        let store = try context.container.preferences(named: "standard")
        let held = DispatchSemaphore(value: 0)
        let start = ContinuousClock.now
        Thread.detachNewThread {
            try? store.update { _ in
                held.signal()
                Thread.sleep(forTimeInterval: 0.5)  // the holder lets go on its own: no task can tell it to
            }
        }
        held.wait()
        let probe = CooperativePoolProbe(until: start.advanced(by: .milliseconds(400)))
        let blocking = (0..<200).map { i in Task { defaults.set(i, forKey: "k\(i)") } }
        for b in blocking { await b.value }
        let ticks = try await probe.ticks()
        XCTAssertLessThan(ticks, 25, "blocking writes left the pool free: the async test above proves nothing here")
        print("control: 200 synchronous preference writes in tasks; the counter ticked \(ticks) times in the first 400 ms")
    }
}
