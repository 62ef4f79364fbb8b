// The presenter protocol (NSFilePresenter's callbacks) and the registration that keeps one presenting.
import Dispatch
import Foundation
import Locking
import Synchronization

/// Who is about to access a presented item, passed to the relinquish callbacks.
public struct PresenterAccess: Sendable, Equatable {
    /// The item being accessed (the presented item, or a directory that contains it).
    public let url: URL
    /// The process that coordinates the access.
    public let processID: Int32
}

/// An object that presents an item to the user and wants to hear about coordinated access to it,
/// as `NSFilePresenter`.
///
/// Callbacks run on the registration's own serial queue, never on the coordinating thread, and
/// each has a deadline (`FileCoordinator.presenterDeadline`): a presenter that misses it is skipped
/// for that access, not waited on. Callbacks run while the requesting coordinator holds (or is
/// about to take) its locks: write to the item directly inside them, without coordinating it.
public protocol FilePresenter: AnyObject, Sendable {
    /// A reader is about to read: stop writing; return a closure to call when the read is over.
    func relinquishPresentedItem(toReader access: PresenterAccess) -> (@Sendable () -> Void)?
    /// A writer is about to write: stop reading and writing; return a closure to call when it is over.
    func relinquishPresentedItem(toWriter access: PresenterAccess) -> (@Sendable () -> Void)?
    /// A reader (or merging or moving writer) is about to access: write unsaved changes now.
    /// - Throws: any error; the access proceeds anyway.
    func savePresentedItemChanges() throws
    /// The item is about to be deleted: close it.
    /// - Throws: any error; the deletion proceeds anyway.
    func accommodatePresentedItemDeletion() throws
    /// The item was moved by a coordinated write (reported with `item(at:didMoveTo:)`).
    func presentedItemDidMove(to newURL: URL)
    /// A coordinated write of the item ended (or an uncoordinated change was observed).
    func presentedItemDidChange()
    /// A coordinated write of an item inside the presented directory ended.
    func presentedSubitemDidChange(at url: URL)
}

/// Defaults: every callback does nothing, and relinquishing hands back no reacquirer.
extension FilePresenter {
    public func relinquishPresentedItem(toReader access: PresenterAccess) -> (@Sendable () -> Void)? { nil }
    public func relinquishPresentedItem(toWriter access: PresenterAccess) -> (@Sendable () -> Void)? { nil }
    public func savePresentedItemChanges() throws {}
    public func accommodatePresentedItemDeletion() throws {}
    public func presentedItemDidMove(to newURL: URL) {}
    public func presentedItemDidChange() {}
    public func presentedSubitemDidChange(at url: URL) {}
}

/// A presenter registered for one item of one domain; keep it to stay registered.
public final class PresenterRegistration: Sendable {
    /// Unique within the process.
    public let id: UInt64
    let presenter: any FilePresenter
    let queue: DispatchQueue
    let hub: PresenterHub
    private let path: Locked<String>

    /// The item presented now (updated when a coordinated move of it is reported).
    public var url: URL { URL(fileURLWithPath: path.withLock { $0 }) }
    var presentedPath: String { path.withLock { $0 } }

    private static let nextID = Atomic<UInt64>(1)

    init(presenter: any FilePresenter, path: String, hub: PresenterHub) {
        id = Self.nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        self.presenter = presenter
        self.queue = DispatchQueue(label: "FileCoordination.presenter.\(id)")
        self.hub = hub
        self.path = Locked(path)
    }

    func moved(to newPath: String) { path.withLock { $0 = newPath } }

    /// Stops presenting: no more callbacks are delivered once this returns (ones already queued may still run).
    public func remove() { hub.remove(self) }

    /// The registration whose presenter the current thread or task acts for (inside `actingAsPresenter(_:)`).
    @TaskLocal static var acting: PresenterRegistration?

    /// Runs `body` as this presenter's own access: every coordination inside it, by any coordinator of the
    /// registration's domain, leaves this presenter out, as `FileCoordinator(filePresenter:)` does.
    ///
    /// For code that cannot choose its coordinator (a library call that coordinates for itself) running in a
    /// presenter's callback, which Apple lets coordinate "with itself as the presenter": without it, such a
    /// coordination would message this presenter, whose callback is still running, and wait out the deadline.
    public func actingAsPresenter<R>(_ body: () throws -> R) rethrows -> R {
        try Self.$acting.withValue(self, operation: body)
    }
}

extension FileCoordinator {
    /// Registers `presenter` for the item at `url` in `domain`, for this process and every other.
    /// - Parameters:
    ///   - presenter: receives the callbacks.
    ///   - url: the presented item (it need not exist yet).
    ///   - domain: the domain whose coordinators will message it.
    /// - Returns: the registration; pass it to `FileCoordinator(filePresenter:)` for the presenter's own
    ///   accesses, and call `remove()` to stop.
    /// - Throws: `.outsideDomain`, or `.lockDirectoryUnavailable` when the rendezvous cannot be set up.
    public static func addFilePresenter(
        _ presenter: any FilePresenter, presenting url: URL, in domain: CoordinationDomain
    ) throws(CoordinationError) -> PresenterRegistration {
        let path = try domain.state.locate(url, resolvingSymlink: false).absolute
        let registration = PresenterRegistration(presenter: presenter, path: path, hub: domain.state.presenters)
        try domain.state.presenters.add(registration)
        return registration
    }
}
