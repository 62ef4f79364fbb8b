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
