// present: a presenter in its own process that reports every callback on stdout.
import Dispatch
import FileCoordination
import Foundation

/// A presenter that prints each callback, saves a known text, and marks when it has relinquished.
final class PrintingPresenter: FilePresenter {
    let item: URL
    let hangs: Bool
    private let never = DispatchSemaphore(value: 0)

    init(item: URL, hangs: Bool) {
        self.item = item
        self.hangs = hangs
    }

    private var marker: URL { item.deletingLastPathComponent().appendingPathComponent(item.lastPathComponent + ".relinquished") }

    private func hangIfAsked() {
        if hangs { never.wait() }
    }

    func savePresentedItemChanges() throws {
        hangIfAsked()
        try Data("saved-by-presenter".utf8).write(to: item)
        say("save")
    }

    func relinquishPresentedItem(toReader access: PresenterAccess) -> (@Sendable () -> Void)? {
        hangIfAsked()
        say("relinquish-reader")
        return { say("reacquire-reader") }
    }

    func relinquishPresentedItem(toWriter access: PresenterAccess) -> (@Sendable () -> Void)? {
        hangIfAsked()
        _ = FileManager.default.createFile(atPath: marker.path, contents: Data())
        say("relinquish-writer")
        let marker = self.marker
        return {
            try? FileManager.default.removeItem(at: marker)
            say("reacquire-writer")
        }
    }

    func accommodatePresentedItemDeletion() throws {
        hangIfAsked()
        say("accommodate-deletion")
    }

    func presentedItemDidMove(to newURL: URL) { say("did-move \(newURL.path)") }
    func presentedItemDidChange() { say("did-change") }
    func presentedSubitemDidChange(at url: URL) { say("subitem-did-change \(url.path)") }
}

/// `present [--hang]`: registers a PrintingPresenter for --item, prints "ready", runs until stdin closes.
enum PresentCommand {
    static func run(_ arguments: WorkerArguments) throws -> Int32 {
        let item = try arguments.item()
        let presenter = PrintingPresenter(item: item, hangs: arguments.flag("hang"))
        let registration = try FileCoordinator.addFilePresenter(presenter, presenting: item, in: try arguments.domain())
        say("ready")
        while readLine() != nil {}
        registration.remove()
        return 0
    }
}
