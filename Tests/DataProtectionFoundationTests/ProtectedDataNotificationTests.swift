// The protected-data notifications and `isProtectedDataAvailable`, driven by a real `dpctl lock` / `unlock` in another
// process through the domain's live lock.
import DataProtectionFoundation
import DataProtection
import XCTest

final class ProtectedDataNotificationTests: FoundationTestCase {
    /// What one observer block saw, on the queue it ran on.
    struct Seen {
        var name: Notification.Name
        var onChosenQueue: Bool
        var available: Bool
        var read: Data?
        var objectIsContext: Bool
    }

    /// `dpctl lock` in another process: `willBecomeUnavailable` runs on the chosen OperationQueue while a `complete`
    /// file still reads (the keys are not gone yet), and before `lock` returns; afterwards the read fails as iOS reports
    /// it and `isProtectedDataAvailable` is false. `dpctl unlock`: `didBecomeAvailable` on the same queue, with the
    /// file readable again. Against the old structure (no notifier in the app context) no notification arrives.
    func testLockAndUnlockFromAnotherProcessPostOnTheObserversQueue() throws {
        let center = NotificationCenter()
        let ctx = AppContext(domain: domain, container: context.container, notificationCenter: center)
        let manager = ProtectedFileManager(context: ctx), app = ProtectedApplication(context: ctx)
        let path = context.container.root + "/Documents/secret.txt"
        XCTAssertTrue(manager.createFile(atPath: path, contents: Data("top secret".utf8), attributes: [.protectionKey: FileProtectionType.complete]))
        XCTAssertTrue(app.isProtectedDataAvailable)

        let queue = OperationQueue()
        queue.name = "observer's queue"
        queue.maxConcurrentOperationCount = 1
        let seen = Guarded<[Seen]>([])
        let willArrived = expectation(description: "will become unavailable"), didArrived = expectation(description: "did become available")
        var tokens: [NSObjectProtocol] = []
        for (name, arrived) in [(ProtectedApplication.protectedDataWillBecomeUnavailableNotification, willArrived), (ProtectedApplication.protectedDataDidBecomeAvailableNotification, didArrived)] {
            tokens.append(center.addObserver(forName: name, object: nil, queue: queue) { note in
                let s = Seen(name: note.name, onChosenQueue: OperationQueue.current === queue, available: app.isProtectedDataAvailable,
                             read: manager.contents(atPath: path), objectIsContext: note.object as AnyObject? === ctx)
                seen.withLock { $0.append(s) }
                arrived.fulfill()
            })
        }
        defer { tokens.forEach(center.removeObserver) }

        try dpctl(["lock"])
        // `lock` returned: the warning was handled during the grace, before the keys went.
        wait(for: [willArrived], timeout: 5)
        let will = try XCTUnwrap(seen.withLock { $0.first })
        XCTAssertEqual(will.name, ProtectedApplication.protectedDataWillBecomeUnavailableNotification)
        XCTAssertTrue(will.onChosenQueue, "not on the observer's queue")
        XCTAssertTrue(will.available, "isProtectedDataAvailable was already false while the warning ran")
        XCTAssertEqual(will.read, Data("top secret".utf8), "the keys were gone before the warning was handled")
        XCTAssertTrue(will.objectIsContext)
        XCTAssertFalse(app.isProtectedDataAvailable)
        XCTAssertNil(manager.contents(atPath: path))
        assertCocoa(.fileReadNoPermission, .locked) { _ = try AppContext.withCurrent(ctx) { try Data(contentsOf: URL(fileURLWithPath: path)) } }

        try dpctlUnlock()
        wait(for: [didArrived], timeout: 5)
        let all = seen.withLock { $0 }
        XCTAssertEqual(all.map(\.name), [ProtectedApplication.protectedDataWillBecomeUnavailableNotification, ProtectedApplication.protectedDataDidBecomeAvailableNotification])
        let did = all[1]
        XCTAssertTrue(did.onChosenQueue)
        XCTAssertTrue(did.available)
        XCTAssertEqual(did.read, Data("top secret".utf8))
        print("protected-data notifications: will-become-unavailable read \(will.read?.count ?? 0) bytes before the keys went; after lock available=false; did-become-available read \(did.read?.count ?? 0) bytes; both on '\(queue.name!)'")
    }

    /// `dpctl lock --now` sends no `willLock`: the warning is still posted, once, after the lock (documented), and a
    /// `--evict-all` lock that also locks class C posts it once too.
    func testALockWithoutGraceStillPostsTheWarningOnce() throws {
        let center = NotificationCenter()
        let ctx = AppContext(domain: domain, container: context.container, notificationCenter: center)
        let count = Guarded(0)
        let token = center.addObserver(forName: ProtectedApplication.protectedDataWillBecomeUnavailableNotification, object: ctx, queue: nil) { _ in
            count.withLock { $0 += 1 }
        }
        defer { center.removeObserver(token) }
        try dpctl(["lock", "--now"])
        XCTAssertTrue(eventually { count.withLock { $0 } == 1 })
        XCTAssertFalse(ProtectedApplication(context: ctx).isProtectedDataAvailable)
        try dpctlUnlock()
        try dpctl(["lock", "--evict-all"])
        XCTAssertTrue(eventually { count.withLock { $0 } == 2 })
        XCTAssertEqual(count.withLock { $0 }, 2)
    }

    /// `shared` follows the current context; without an app context there is no protected data.
    func testSharedFollowsTheContextAndNoContextMeansNoProtectedData() throws {
        XCTAssertTrue(inContext { ProtectedApplication.shared.isProtectedDataAvailable })
        try XCTSkipIf(AppContext.current != nil, "FoundationLayerTests bootstrapped a context in this process earlier")
        XCTAssertFalse(ProtectedApplication.shared.isProtectedDataAvailable)
    }
}

extension FoundationTestCase {
    /// Polls `condition` for up to 5 s (never a bare sleep as synchronisation).
    func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            if condition() { return true }
            usleep(10_000)
        }
        return condition()
    }
}

/// A value shared with observer blocks on other threads, behind a lock.
final class Guarded<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) -> R) -> R { lock.lock(); defer { lock.unlock() }; return body(&value) }
}
