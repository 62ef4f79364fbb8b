// `UIApplication`'s protected-data surface: the two notifications and `isProtectedDataAvailable`, driven by the
// domain's live lock (DataProtectionKeys/Live), whose `willLock` / `didLock` / `didUnlock` events reach every process
// of the domain. No second mechanism: this file only turns those events into `NotificationCenter` posts.
import DataProtection
import Foundation
internal import Locking

/// The protected-data calls iOS code makes on `UIApplication.shared`, on the app context.
///
/// A port may add `typealias UIApplication = ProtectedApplication` to a file, so that
/// `UIApplication.protectedDataWillBecomeUnavailableNotification` and `UIApplication.shared.isProtectedDataAvailable`
/// read as on iOS.
public struct ProtectedApplication: Sendable {
    /// Posted when class `complete` is about to lock (iOS: `UIApplication.protectedDataWillBecomeUnavailableNotification`).
    ///
    /// Posted on the `willLock` event, which every process of the domain receives the grace (`LiveLock.defaultGrace`,
    /// half a second; `dpctl lock --grace`) before the keys go: protected files still open and read while observers
    /// run. A lock with no grace (`dpctl lock --now`) sends no `willLock`; the notification is then posted on the
    /// `didLock` event, after the keys are gone (iOS always warns first; here the locker chose not to).
    public static let protectedDataWillBecomeUnavailableNotification = Notification.Name("UIApplicationProtectedDataWillBecomeUnavailable")

    /// Posted when the domain is unlocked again (iOS: `UIApplication.protectedDataDidBecomeAvailableNotification`).
    public static let protectedDataDidBecomeAvailableNotification = Notification.Name("UIApplicationProtectedDataDidBecomeAvailable")

    private let explicit: AppContext?

    /// The application of the current app context (`AppContext.current`, resolved at each call).
    public static var shared: ProtectedApplication { ProtectedApplication() }

    /// The application of `context`, or of the current one when nil.
    public init(context: AppContext? = nil) { explicit = context }

    /// Whether class `complete` is unlocked (iOS: `isProtectedDataAvailable`); false when there is no app context.
    ///
    /// Read from the live lock's shared state page (one atomic load), so it changes in every process the moment a
    /// lock marks the classes locked, and is already true when `protectedDataDidBecomeAvailableNotification` arrives.
    /// It is still true while `protectedDataWillBecomeUnavailableNotification` observers run (the keys are still
    /// there). Difference from iOS: before the domain's first unlock since the runtime directory was made (a reboot),
    /// the page has never been marked locked, so this says true while opens still fail `.locked`.
    public var isProtectedDataAvailable: Bool {
        (explicit ?? AppContext.current)?.domain.liveLock.isProtectedDataAvailable ?? false
    }
}

/// Posts the protected-data notifications of one app context to its `NotificationCenter`, from live-lock events.
///
/// The events arrive on the live lock's listener thread; the posts happen on a serial queue of their own, in event
/// order, so an observer that takes long never delays this process's acknowledgement of a lock (which would make the
/// locker report it as timed out). `NotificationCenter` then runs each observer's block on the queue the observer
/// chose in `addObserver(forName:object:queue:using:)`; an observer with no queue runs on the posting thread, with the
/// app context as the current one (an `OperationQueue` does not carry it).
final class ProtectedDataNotifier: Sendable {
    private let subscription: EventSubscription
    /// The notifications' object: the app context, held weakly (it holds this notifier).
    let sender: Locked<Sender>
    struct Sender: Sendable { weak var context: AppContext? }
    /// Whether `willBecomeUnavailable` was posted for the lock now coming (so `didLock` does not post it twice).
    private let warned: Locked<Bool>

    /// Subscribes to `domain`'s live lock and posts to `center`, with `sender`'s context as the object.
    init(domain: ProtectionDomain, center: NotificationCenter) {
        let poster = DispatchQueue(label: "DataProtectionFoundation.protectedData")
        let (warned, sender) = (Locked(false), Locked(Sender()))
        (self.warned, self.sender) = (warned, sender)
        subscription = domain.liveLock.onEvent { event in
            let name: Notification.Name
            switch event {
            case .willLock:
                warned.withLock { $0 = true }
                name = ProtectedApplication.protectedDataWillBecomeUnavailableNotification
            case .didLock(let classes):
                guard classes.contains(.complete), warned.withLock({ (w: inout Bool) -> Bool in defer { w = false }; return !w }) else { return }
                name = ProtectedApplication.protectedDataWillBecomeUnavailableNotification
            case .didUnlock:
                warned.withLock { $0 = false }
                name = ProtectedApplication.protectedDataDidBecomeAvailableNotification
            }
            // Posted with the context current, so an observer that runs on the posting thread (`queue: nil`) reaches
            // its app's container through `Data(contentsOf:)`, `UserDefaults.standard` and the like, as on iOS.
            poster.async {
                guard let context = sender.withLock({ $0.context }) else { return center.post(name: name, object: nil) }
                AppContext.withCurrent(context) { center.post(name: name, object: context) }
            }
        }
    }

    deinit { subscription.cancel() }
}
