// `PresenterRegistration.actingAsPresenter(_:)`: code inside a presenter's callback that coordinates with a coordinator
// of its own (not the presenter's) leaves that presenter out, as `FileCoordinator(filePresenter:)` would.
import FileCoordination
import Foundation
import XCTest

/// A presenter whose save writes the item under a plain coordinator of the domain, acting as itself.
final class SelfSavingPresenter: FilePresenter, @unchecked Sendable {
    let domain: CoordinationDomain
    let item: URL
    let registration = NSLock()
    var own: PresenterRegistration?
    let relinquished = NSLock()
    private(set) var relinquishCount = 0

    init(domain: CoordinationDomain, item: URL) { self.domain = domain; self.item = item }

    func savePresentedItemChanges() throws {
        let body = {
            try FileCoordinator(domain: self.domain).coordinate(writingItemAt: self.item, options: .forReplacing) { url in
                try Data("saved".utf8).write(to: url)
            }
        }
        if let own = registration.withLock({ own }) { try own.actingAsPresenter(body) } else { try body() }
    }

    func relinquishPresentedItem(toWriter access: PresenterAccess) -> (@Sendable () -> Void)? {
        relinquished.withLock { relinquishCount += 1 }
        return nil
    }
}

final class ActingPresenterTests: XCTestCase {
    /// A merging writer asks the presenter to save; the save's own coordinated write, acting as the presenter, does not
    /// message it (no relinquish to itself, whose queue is busy with the save), so the writer is not held up by a
    /// presenter deadline. Against the engine before `actingAsPresenter` (or with the save outside it) the save's
    /// write waits out the deadline on the presenter itself.
    func testASaveInsideTheCallbackDoesNotMessageItsOwnPresenter() throws {
        let root = try makeScratchDirectory()
        let domain = try CoordinationDomain(root: root)
        let item = root.appendingPathComponent("doc")
        let presenter = SelfSavingPresenter(domain: domain, item: item)
        let registration = try FileCoordinator.addFilePresenter(presenter, presenting: item, in: domain)
        defer { registration.remove() }
        presenter.registration.withLock { presenter.own = registration }

        let start = ContinuousClock.now
        try FileCoordinator(domain: domain, presenterDeadline: .seconds(1)).coordinate(writingItemAt: item, options: .forMerging) { url in
            XCTAssertEqual(try Data(contentsOf: url), Data("saved".utf8), "the presenter's save came first")
        }
        let elapsed = ContinuousClock.now - start
        XCTAssertLessThan(elapsed, .milliseconds(900), "the save waited out the deadline on its own presenter")
        XCTAssertEqual(presenter.relinquished.withLock { presenter.relinquishCount }, 1, "only the merging writer's relinquish")
        print("acting presenter: merging write with a self-coordinating save took \(elapsed)")
    }
}
