// NSFilePresenter and NSFileCoordinator shapes on the FileCoordination engine: a presenter here, iOS-style code in
// another process that writes the presented protected file.
import DataProtectionFoundation
import DataProtection
import XCTest

/// An iOS-style document presenter: unsaved text, saved on request, relinquished to writers, reloaded on change.
final class NoteDocument: NSObject, NSFilePresenter, @unchecked Sendable {
    let presentedItemURL: URL?
    let presentedItemOperationQueue: OperationQueue
    let events = Guarded<[String]>([])
    let onOwnQueue = Guarded(true)
    /// The document's text and whether it has unsaved changes (touched on the presenter's queue only).
    let state: Guarded<(text: String, dirty: Bool)>

    init(url: URL, unsaved: String) {
        presentedItemURL = url
        state = Guarded((unsaved, true))
        presentedItemOperationQueue = OperationQueue()
        presentedItemOperationQueue.maxConcurrentOperationCount = 1
    }

    private func record(_ event: String) {
        let mine = OperationQueue.current === presentedItemOperationQueue
        onOwnQueue.withLock { $0 = $0 && mine }
        events.withLock { $0.append(event) }
    }

    func savePresentedItemChanges(completionHandler: @escaping (Error?) -> Void) {
        let (text, dirty) = state.withLock { $0 }
        guard dirty else { return completionHandler(nil) }
        record("save")
        // As on iOS: the presenter writes its own changes inside the callback (this module's protected write).
        do {
            try Data(text.utf8).write(to: presentedItemURL!)
            state.withLock { $0.dirty = false }
            completionHandler(nil)
        } catch {
            record("save failed: \(error)")
            completionHandler(error)
        }
    }

    func relinquishPresentedItem(toWriter writer: @escaping ((() -> Void)?) -> Void) {
        record("relinquish")
        writer { self.record("reacquire") }
    }

    func presentedItemDidChange() {
        let text = (try? Data(contentsOf: presentedItemURL!)).map { String(decoding: $0, as: UTF8.self) } ?? "unreadable"
        state.withLock { $0 = (text, false) }
        record("didChange: \(text)")
    }
}

final class FilePresenterTests: FoundationTestCase {
    /// A merging write from another process makes the presenter here save its unsaved text and relinquish the file
    /// before the writer reads it, so the writer's merge contains the presenter's save; the reacquirer and
    /// presentedItemDidChange follow, all on the presenter's queue. Against the engine without "acting as presenter",
    /// the presenter's own save (a coordinated write) messages the presenter itself and waits out the deadline.
    func testAWriterInAnotherProcessMakesThePresenterSaveAndRelinquishFirst() throws {
        let url = url("Documents/note.txt")
        try inContext { try Data("saved: ".utf8).write(to: url) }
        let document = NoteDocument(url: url, unsaved: "saved: draft typed here")
        try NSFileCoordinator.addFilePresenter(document, context: context)
        defer { NSFileCoordinator.removeFilePresenter(document) }

        let start = ContinuousClock.now
        let writer = try startProduct("container-hold", [context.container.root, "merge", "Documents/note.txt", " + merged by the writer"])
        let line = writer.firstLine()
        let elapsed = ContinuousClock.now - start
        let merged = "saved: draft typed here + merged by the writer"
        XCTAssertTrue(eventually { document.events.withLock { $0.count } >= 4 })
        let r = writer.finish()
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(line, "merged \(merged.utf8.count)", r.stderr)
        XCTAssertEqual(document.events.withLock { $0 }, ["save", "relinquish", "reacquire", "didChange: \(merged)"])
        XCTAssertEqual(try inContext { String(decoding: try Data(contentsOf: url), as: UTF8.self) }, merged)
        XCTAssertTrue(document.onOwnQueue.withLock { $0 }, "a callback ran off presentedItemOperationQueue")
        XCTAssertLessThan(elapsed, .seconds(2), "the writer waited out a presenter deadline")
        print("presenter: writer process merged \(merged.utf8.count) bytes after save + relinquish in \(elapsed); events \(document.events.withLock { $0 })")
    }

    /// The error-pointer forms: a read in the container runs its accessor; one outside it reports a CocoaError in
    /// `error` and runs nothing; a presenter without a URL is refused.
    func testCoordinateFormsReportFailuresThroughTheErrorPointer() throws {
        let inside = url("Documents/a.txt")
        var error: NSError?, ran = false
        let coordinator = NSFileCoordinator(context: context)
        coordinator.coordinate(readingItemAt: inside, options: [], error: &error) { XCTAssertEqual($0, inside); ran = true }
        XCTAssertNil(error)
        XCTAssertTrue(ran)
        ran = false
        coordinator.coordinate(writingItemAt: URL(fileURLWithPath: "/tmp/outside.txt"), options: [], error: &error) { _ in ran = true }
        XCTAssertFalse(ran)
        XCTAssertEqual((error as? CocoaError)?.code ?? CocoaError.Code(rawValue: error?.code ?? 0), .fileWriteNoPermission, "\(String(describing: error))")
        final class NoURL: NSObject, NSFilePresenter {
            var presentedItemURL: URL? { nil }
            let presentedItemOperationQueue = OperationQueue()
        }
        XCTAssertThrowsError(try NSFileCoordinator.addFilePresenter(NoURL(), context: context))
    }
}

/// A presenter recording Apple's callbacks in this process.
final class RecordingDocument: NSObject, NSFilePresenter, @unchecked Sendable {
    var presentedItemURL: URL? { url.withLock { $0 } }
    let url: Guarded<URL>
    let presentedItemOperationQueue = OperationQueue()
    let events = Guarded<[String]>([])

    init(url: URL) {
        self.url = Guarded(url)
        presentedItemOperationQueue.maxConcurrentOperationCount = 1
    }

    func relinquishPresentedItem(toReader reader: @escaping ((() -> Void)?) -> Void) {
        events.withLock { $0.append("relinquish-reader") }
        reader { self.events.withLock { $0.append("reacquire-reader") } }
    }
    func accommodatePresentedItemDeletion(completionHandler: @escaping (Error?) -> Void) {
        events.withLock { $0.append("accommodate-deletion") }
        completionHandler(nil)
    }
    func presentedItemDidMove(to newURL: URL) {
        url.withLock { $0 = newURL }
        events.withLock { $0.append("did-move \(newURL.lastPathComponent)") }
    }
}

extension FilePresenterTests {
    /// In this process: a coordinated read relinquishes to the reader and reacquires; a move reported with
    /// item(at:didMoveTo:) reaches presentedItemDidMove(to:); ProtectedFileManager's removeItem (a coordinated
    /// delete) makes the presenter accommodate the deletion. The two-item and prepare forms run their accessors.
    func testReaderRelinquishMoveAndDeletionReachTheApplePresenter() throws {
        let a = url("Documents/a.txt"), b = url("Documents/b.txt")
        try inContext { try Data("a".utf8).write(to: a) }
        let document = RecordingDocument(url: a)
        try NSFileCoordinator.addFilePresenter(document, context: context)
        defer { NSFileCoordinator.removeFilePresenter(document) }
        let coordinator = NSFileCoordinator(context: context)
        var error: NSError?

        coordinator.coordinate(readingItemAt: a, options: .withoutChanges, error: &error) { _ in }
        XCTAssertNil(error)
        XCTAssertTrue(eventually { document.events.withLock { $0.count } == 2 })
        XCTAssertEqual(document.events.withLock { $0 }, ["relinquish-reader", "reacquire-reader"])

        var batchRan = false
        coordinator.prepare(forReadingItemsAt: [a], options: [], writingItemsAt: [b], options: [], error: &error) { done in
            var moveError: NSError?
            coordinator.coordinate(writingItemAt: a, options: .forMoving, writingItemAt: b, options: .forReplacing, error: &moveError) { from, to in
                do { try FileManager.default.moveItem(at: from, to: to) } catch { XCTFail("move: \(error)") }
                coordinator.item(at: from, didMoveTo: to)
            }
            XCTAssertNil(moveError)
            batchRan = true
            done()
        }
        XCTAssertNil(error)
        XCTAssertTrue(batchRan)
        XCTAssertTrue(eventually { document.events.withLock { $0.last } == "did-move b.txt" }, "\(document.events.withLock { $0 })")
        XCTAssertEqual(document.presentedItemURL, b)

        try ProtectedFileManager(context: context).removeItem(atPath: b.path)
        XCTAssertTrue(eventually { document.events.withLock { $0.contains("accommodate-deletion") } }, "\(document.events.withLock { $0 })")
        XCTAssertFalse(FileManager.default.fileExists(atPath: b.path))
        print("apple presenter in-process: \(document.events.withLock { $0 })")
    }
}
