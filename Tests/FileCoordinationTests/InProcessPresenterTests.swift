// Presenters in the same process: which callbacks come, in which order, and never to the coordinator's own presenter.
import FileCoordination
import Foundation
import XCTest

/// A presenter that records its callbacks and the thread they ran on.
final class RecordingPresenter: FilePresenter, @unchecked Sendable {
    private let lock = NSLock()
    private var log: [String] = []
    private let arrived = DispatchSemaphore(value: 0)
    var callbackThreads: [Thread] = []

    private func record(_ event: String) {
        lock.withLock {
            log.append(event)
            callbackThreads.append(Thread.current)
        }
        arrived.signal()
    }

    var events: [String] { lock.withLock { log } }

    /// Waits until `count` events have arrived (callbacks after the access are asynchronous).
    func waitForEvents(_ count: Int, within seconds: Double = 5) -> [String] {
        while events.count < count {
            if arrived.wait(timeout: .now() + seconds) == .timedOut { break }
        }
        return events
    }

    func savePresentedItemChanges() throws { record("save") }
    func relinquishPresentedItem(toReader access: PresenterAccess) -> (@Sendable () -> Void)? {
        record("relinquish-reader")
        return { self.record("reacquire") }
    }
    func relinquishPresentedItem(toWriter access: PresenterAccess) -> (@Sendable () -> Void)? {
        record("relinquish-writer")
        return { self.record("reacquire") }
    }
    func accommodatePresentedItemDeletion() throws { record("accommodate-deletion") }
    func presentedItemDidMove(to newURL: URL) { record("did-move \(newURL.lastPathComponent)") }
    func presentedItemDidChange() { record("did-change") }
    func presentedSubitemDidChange(at url: URL) { record("subitem-did-change \(url.lastPathComponent)") }
}

final class InProcessPresenterTests: XCTestCase {
    /// A fresh domain with a RecordingPresenter registered for its item "doc".
    private func presentedDocument() throws -> (CoordinationDomain, URL, RecordingPresenter, PresenterRegistration) {
        let root = try makeScratchDirectory()
        let domain = try CoordinationDomain(root: root)
        let item = root.appendingPathComponent("doc")
        let presenter = RecordingPresenter()
        return (domain, item, presenter, try FileCoordinator.addFilePresenter(presenter, presenting: item, in: domain))
    }

    func testReadAndWriteCallbacksInOrderOffTheCallersThread() throws {
        let (domain, item, presenter, registration) = try presentedDocument()
        defer { registration.remove() }
        let coordinator = FileCoordinator(domain: domain)

        try coordinator.coordinate(readingItemAt: item) { _ in
            XCTAssertEqual(presenter.events, ["save", "relinquish-reader"], "save and relinquish come before the accessor")
        }
        XCTAssertEqual(presenter.waitForEvents(3), ["save", "relinquish-reader", "reacquire"])

        try coordinator.coordinate(writingItemAt: item) { _ in }
        XCTAssertEqual(Array(presenter.waitForEvents(6).suffix(3)), ["relinquish-writer", "reacquire", "did-change"])
        XCTAssertFalse(presenter.callbackThreads.contains(Thread.current), "callbacks must not run on the coordinating thread")
    }

    func testMovesDeletionsAndSubitemChanges() throws {
        let root = try makeScratchDirectory()
        let domain = try CoordinationDomain(root: root)
        try FileManager.default.createDirectory(at: root.appendingPathComponent("dir"), withIntermediateDirectories: true)
        let child = root.appendingPathComponent("dir/doc")
        let folderPresenter = RecordingPresenter()
        let childPresenter = RecordingPresenter()
        let folderRegistration = try FileCoordinator.addFilePresenter(folderPresenter, presenting: root.appendingPathComponent("dir"), in: domain)
        let childRegistration = try FileCoordinator.addFilePresenter(childPresenter, presenting: child, in: domain)
        defer {
            folderRegistration.remove()
            childRegistration.remove()
        }
        let coordinator = FileCoordinator(domain: domain)

        try coordinator.coordinate(writingItemAt: child, options: .forReplacing) { url in try Data("x".utf8).write(to: url) }
        XCTAssertEqual(folderPresenter.waitForEvents(1), ["subitem-did-change doc"])

        let moved = root.appendingPathComponent("moved")
        try coordinator.coordinate(writingItemAt: root.appendingPathComponent("dir"), options: .forMoving, writingItemAt: moved, options: .forReplacing) {
            source, destination in
            try FileManager.default.moveItem(at: source, to: destination)
            try coordinator.item(at: source, didMoveTo: destination)
        }
        XCTAssertEqual(childPresenter.waitForEvents(7).suffix(3), ["relinquish-writer", "reacquire", "did-move doc"])
        XCTAssertEqual(childRegistration.url.path, moved.appendingPathComponent("doc").path, "the registration follows the move")

        try coordinator.coordinate(writingItemAt: moved.appendingPathComponent("doc"), options: .forDeleting) { url in
            try FileManager.default.removeItem(at: url)
        }
        XCTAssertEqual(childPresenter.waitForEvents(8).last, "accommodate-deletion")
    }

    func testOwnPresenterIsNeverMessaged() throws {
        let root = try makeScratchDirectory()
        let domain = try CoordinationDomain(root: root)
        let item = root.appendingPathComponent("doc")
        let mine = RecordingPresenter()
        let theirs = RecordingPresenter()
        let myRegistration = try FileCoordinator.addFilePresenter(mine, presenting: item, in: domain)
        let theirRegistration = try FileCoordinator.addFilePresenter(theirs, presenting: item, in: domain)
        defer {
            myRegistration.remove()
            theirRegistration.remove()
        }
        let coordinator = FileCoordinator(domain: domain, filePresenter: myRegistration)
        try coordinator.coordinate(writingItemAt: item) { _ in }
        XCTAssertEqual(theirs.waitForEvents(3), ["relinquish-writer", "reacquire", "did-change"])
        XCTAssertEqual(mine.events, [], "a coordinator must not message its own presenter")
    }

    func testUncoordinatedWritesAreReportedOnceAfterTheFact() throws {
        let (domain, item, presenter, registration) = try presentedDocument()
        defer { registration.remove() }

        try Data("written without coordination".utf8).write(to: item)
        XCTAssertEqual(presenter.waitForEvents(1), ["did-change"], "an uncoordinated write should be reported")

        // A coordinated write is reported by the coordinator only, not a second time by inotify.
        try FileCoordinator(domain: domain).coordinate(writingItemAt: item) { url in try Data("coordinated".utf8).write(to: url) }
        XCTAssertEqual(presenter.waitForEvents(4), ["did-change", "relinquish-writer", "reacquire", "did-change"])
        XCTAssertEqual(presenter.waitForEvents(5, within: 0.5).count, 4, "the coordinated write was reported twice")
    }

    func testRemovedPresenterHearsNothing() throws {
        let root = try makeScratchDirectory()
        let domain = try CoordinationDomain(root: root)
        let item = root.appendingPathComponent("doc")
        let presenter = RecordingPresenter()
        try FileCoordinator.addFilePresenter(presenter, presenting: item, in: domain).remove()
        try FileCoordinator(domain: domain).coordinate(writingItemAt: item) { _ in }
        XCTAssertEqual(presenter.events, [])
    }
}
