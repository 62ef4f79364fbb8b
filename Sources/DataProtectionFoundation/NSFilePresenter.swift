// `NSFilePresenter`'s shape (Foundation on Linux has none) on the FileCoordination engine's presenters: Apple's
// completion-handler and reacquirer-block callbacks, run on the presenter's `presentedItemOperationQueue`, bridged to
// the engine's synchronous callbacks. The engine decides who is messaged and when; this file only changes the shape.
import DataProtection
import FileCoordination
import Foundation
internal import Locking

/// An object that presents an item and hears about coordinated access to it (iOS: `NSFilePresenter`).
///
/// Register it with `NSFileCoordinator.addFilePresenter(_:)`. Every callback runs on `presentedItemOperationQueue`,
/// with the app context it was added in as the current one, and acts for this presenter: a coordinated access made inside it (`Data.write(to:)`, `Data(contentsOf:)`, an
/// `NSFileCoordinator` of any presenter) does not message this presenter again, as with Apple's
/// `NSFileCoordinator(filePresenter: self)`. Every callback is optional (the defaults do nothing and hand back no
/// reacquirer), as Apple's are.
///
/// Differences from Apple: the engine waits for each callback a bounded time (the requesting coordinator's
/// `presenterDeadline`, 2 s by default) and then proceeds without the presenter; a presenter's completion handler or
/// reacquirer block that is never called frees its queue after `NSFileCoordinator.presenterCallbackLimit`.
public protocol NSFilePresenter: AnyObject {
    /// The item presented; read when the presenter is added (a nil URL is not registered).
    var presentedItemURL: URL? { get }
    /// The queue every callback runs on.
    var presentedItemOperationQueue: OperationQueue { get }

    /// A reader is about to read: stop writing, then call `reader` with a block to run when the read is over.
    func relinquishPresentedItem(toReader reader: @escaping ((() -> Void)?) -> Void)
    /// A writer is about to write: stop reading and writing, then call `writer` with a block to run when it is over.
    func relinquishPresentedItem(toWriter writer: @escaping ((() -> Void)?) -> Void)
    /// A reader (or a merging or moving writer) is about to access: save unsaved changes, then call the handler.
    func savePresentedItemChanges(completionHandler: @escaping (Error?) -> Void)
    /// The item is about to be deleted: close it, then call the handler.
    func accommodatePresentedItemDeletion(completionHandler: @escaping (Error?) -> Void)
    /// The item was moved by a coordinated write.
    func presentedItemDidMove(to newURL: URL)
    /// A coordinated write of the item ended (or an uncoordinated change was seen).
    func presentedItemDidChange()
    /// A coordinated write of an item inside the presented directory ended.
    func presentedSubitemDidChange(at url: URL)
}

extension NSFilePresenter {
    public func relinquishPresentedItem(toReader reader: @escaping ((() -> Void)?) -> Void) { reader(nil) }
    public func relinquishPresentedItem(toWriter writer: @escaping ((() -> Void)?) -> Void) { writer(nil) }
    public func savePresentedItemChanges(completionHandler: @escaping (Error?) -> Void) { completionHandler(nil) }
    public func accommodatePresentedItemDeletion(completionHandler: @escaping (Error?) -> Void) { completionHandler(nil) }
    public func presentedItemDidMove(to newURL: URL) {}
    public func presentedItemDidChange() {}
    public func presentedSubitemDidChange(at url: URL) {}
}

/// The engine's presenter for one `NSFilePresenter`: runs each callback on the presenter's queue, acting for it.
///
/// `@unchecked Sendable`: the Apple-shaped presenter is not `Sendable`; it is only touched on its own
/// `presentedItemOperationQueue` (one operation at a time when that queue is serial, as Apple requires), and the
/// values crossing back (errors, reacquirers) pass through one `Locked` slot per callback.
final class PresenterBridge: FilePresenter, @unchecked Sendable {
    let presenter: any NSFilePresenter
    /// The app context the presenter was added in: current while its callbacks run, so the module's calls in them
    /// (`Data.write(to:)`, `Data(contentsOf:)`) reach the same container.
    let context: AppContext
    /// The engine's registration, set once right after registering (nil only before that).
    let registration = Locked<PresenterRegistration?>(nil)

    init(_ presenter: any NSFilePresenter, context: AppContext) {
        self.presenter = presenter
        self.context = context
    }

    /// Runs `body` on the presenter's queue as its own access, in its app context, without waiting.
    private func post(_ body: @escaping () -> Void) {
        let (registration, context, boxed) = (registration.withLock { $0 }, context, Unchecked(body))
        presenter.presentedItemOperationQueue.addOperation {
            AppContext.withCurrent(context) {
                if let registration { registration.actingAsPresenter(boxed.value) } else { boxed.value() }
            }
        }
    }

    /// Runs `body` on the presenter's queue and waits until it calls its answer (at most `presenterCallbackLimit`).
    private func ask<Answer>(_ body: @escaping (_ answer: @escaping (Answer) -> Void) -> Void) -> Answer? {
        let done = DispatchSemaphore(value: 0), slot = Locked<Unchecked<Answer>?>(nil)
        post {
            body { answer in
                let first = slot.withLock { (s: inout Unchecked<Answer>?) -> Bool in
                    guard s == nil else { return false }
                    s = Unchecked(answer)
                    return true
                }
                if first { done.signal() }
            }
        }
        guard done.wait(timeout: .now() + NSFileCoordinator.presenterCallbackLimit) == .success else { return nil }
        return slot.withLock { $0?.value }
    }

    /// The engine's reacquirer for Apple's: runs the block on the presenter's queue.
    private func reacquirer(_ block: (() -> Void)??) -> (@Sendable () -> Void)? {
        guard case let block?? = block else { return nil }
        let boxed = Unchecked(block)
        return { [self] in post(boxed.value) }
    }

    func relinquishPresentedItem(toReader access: PresenterAccess) -> (@Sendable () -> Void)? {
        reacquirer(ask { answer in self.presenter.relinquishPresentedItem(toReader: answer) })
    }

    func relinquishPresentedItem(toWriter access: PresenterAccess) -> (@Sendable () -> Void)? {
        reacquirer(ask { answer in self.presenter.relinquishPresentedItem(toWriter: answer) })
    }

    func savePresentedItemChanges() throws {
        if case let error?? = ask({ answer in self.presenter.savePresentedItemChanges(completionHandler: answer) }) { throw error }
    }

    func accommodatePresentedItemDeletion() throws {
        if case let error?? = ask({ answer in self.presenter.accommodatePresentedItemDeletion(completionHandler: answer) }) { throw error }
    }

    func presentedItemDidMove(to newURL: URL) { post { self.presenter.presentedItemDidMove(to: newURL) } }
    func presentedItemDidChange() { post { self.presenter.presentedItemDidChange() } }
    func presentedSubitemDidChange(at url: URL) { post { self.presenter.presentedSubitemDidChange(at: url) } }
}

/// A value that crosses queues where Apple's shapes are not `Sendable` (see `PresenterBridge`).
struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
