// Which presenters an access concerns, and the three phases: save before, relinquish during, notify after.
import Dispatch
import Foundation
import Locking
import Synchronization
internal import Glibc
internal import PathSyntax

/// The presenters of one domain as this process sees them: its own registrations and, through the
/// rendezvous, those of other processes.
final class PresenterHub: Sendable {
    private let lockDirectory: String
    private let local = Locked<[UInt64: PresenterRegistration]>([:])
    private let localCount = Atomic<Int>(0)
    private let rendezvousState = Locked<Rendezvous?>(nil)
    private let watcherState = Locked<ChangeWatcher??>(nil)
    /// One serial queue per presenter process, for every message sent to it.
    private let peerQueues = Locked<[String: DispatchQueue]>([:])

    init(lockDirectory: String, root: String) {
        self.lockDirectory = lockDirectory
    }

    private func rendezvous() -> Rendezvous? {
        rendezvousState.withLock { state in
            if state == nil { state = try? Rendezvous(lockDirectory: lockDirectory) }
            return state
        }
    }

    /// The inotify watcher, started with the first registration (nil if inotify is unavailable).
    var watcher: ChangeWatcher? {
        watcherState.withLock { state in
            if state == nil {
                state = .some(ChangeWatcher { [weak self] path in self?.reportUncoordinatedChange(at: path) })
            }
            return state!
        }
    }

    /// Tells the presenters of `path` in this process that it changed without coordination.
    private func reportUncoordinatedChange(at path: String) {
        for registration in localRegistrations(presenting: path) {
            registration.queue.async { registration.presenter.presentedItemDidChange() }
        }
    }

    func add(_ registration: PresenterRegistration) throws(CoordinationError) {
        watcher?.watch(registration.presentedPath)
        let paths = local.withLock { local in
            local[registration.id] = registration
            return local.values.map(\.presentedPath)
        }
        localCount.add(1, ordering: .relaxed)
        guard let rendezvous = rendezvous() else {
            remove(registration)
            throw CoordinationError(
                .lockDirectoryUnavailable, path: lockDirectory,
                message: "cannot set up the presenter rendezvous in '\(lockDirectory)/presenters'; check its permissions")
        }
        try rendezvous.publish(paths, registry: self)
    }

    func remove(_ registration: PresenterRegistration) {
        let (removed, paths) = local.withLock { local in
            (local.removeValue(forKey: registration.id) != nil, local.values.map(\.presentedPath))
        }
        guard removed else { return }
        localCount.subtract(1, ordering: .relaxed)
        try? rendezvous()?.publish(paths, registry: self)
    }

    /// Republishes after a registration moved.
    private func republish() {
        let paths = local.withLock { $0.values.map(\.presentedPath) }
        try? rendezvous()?.publish(paths, registry: self)
    }

    func localRegistrations(presenting path: String) -> [PresenterRegistration] {
        local.withLock { $0.values.filter { samePath($0.presentedPath, path) } }
    }

    /// Every presented item this access might concern, except `excluded`; cheap when there are none.
    private func endpoints(excluding excluded: UInt64?) -> [(endpoint: PresenterEndpoint, path: String)] {
        var result: [(PresenterEndpoint, String)] = []
        if localCount.load(ordering: .relaxed) > 0 {
            for registration in local.withLock({ Array($0.values) }) where registration.id != excluded {
                result.append((.local(registration), registration.presentedPath))
            }
        }
        for peer in rendezvous()?.peers() ?? [] {
            let queue = peerQueues.withLock { queues in
                if let queue = queues[peer.id] { return queue }
                let queue = DispatchQueue(label: "FileCoordination.peer.\(peer.id)")
                queues[peer.id] = queue
                return queue
            }
            for path in peer.paths { result.append((.remote(peer, presentedPath: path, queue: queue), path)) }
        }
        return result
    }

    /// The messages of one phase: each endpoint gets at most one message per item.
    private func messages(
        for items: [ResolvedItem], excluding excluded: UInt64?, skipping: Set<String> = [],
        choose: (ResolvedItem, PresentedRelation) -> PresenterMessage?
    ) -> [(PresenterMessage, PresenterEndpoint)] {
        var candidates = endpoints(excluding: excluded)
        if !skipping.isEmpty { candidates.removeAll { skipping.contains($0.endpoint.key) } }
        guard !candidates.isEmpty else { return [] }
        var result: [(PresenterMessage, PresenterEndpoint)] = []
        var seen = Set<String>()
        for item in items {
            for (endpoint, path) in candidates {
                guard let relation = PresentedRelation(presented: path, accessed: item.absolute),
                    let message = choose(item, relation)
                else { continue }
                let key = "\(endpoint.key)|\(message)"
                if seen.insert(key).inserted { result.append((message, endpoint)) }
            }
        }
        return result
    }

    private func deliver(_ messages: [(PresenterMessage, PresenterEndpoint)], deadline: Duration) -> PresenterDelivery {
        let delivery = PresenterDelivery()
        for (message, endpoint) in messages {
            delivery.send(message, to: endpoint, deadline: deadline)
        }
        return delivery
    }

    // MARK: Phase 1 — before the locks: presenters save.

    private func saveMessages(_ items: [ResolvedItem], excluding: UInt64?) -> [(PresenterMessage, PresenterEndpoint)] {
        messages(for: items, excluding: excluding) { item, relation in
            item.asksPresentersToSave && relation != .container ? .save : nil
        }
    }

    /// Asks for saves and waits up to `deadline`; returns the presenters that missed it.
    func requestSavesBlocking(_ items: [ResolvedItem], excluding: UInt64?, deadline: Duration) -> Set<String> {
        let messages = saveMessages(items, excluding: excluding)
        guard !messages.isEmpty else { return [] }
        let delivery = deliver(messages, deadline: deadline)
        delivery.waitBlocking(deadline: deadline)
        return delivery.missed
    }

    /// The async form of `requestSavesBlocking`.
    func requestSaves(_ items: [ResolvedItem], excluding: UInt64?, deadline: Duration) async -> Set<String> {
        let messages = saveMessages(items, excluding: excluding)
        guard !messages.isEmpty else { return [] }
        let delivery = deliver(messages, deadline: deadline)
        await delivery.wait(deadline: deadline)
        return delivery.missed
    }

    // MARK: Phase 2 — with the locks held: presenters relinquish (or accommodate deletion).

    private func relinquishMessages(
        _ items: [ResolvedItem], excluding: UInt64?, skipping: Set<String>
    ) -> [(PresenterMessage, PresenterEndpoint)] {
        let pid = getpid()
        return messages(for: items, excluding: excluding, skipping: skipping) { item, relation in
            switch relation {
            case .container: return nil
            case .inside where item.intent.access != .writeSubtree: return nil
            default: break
            }
            if item.isRead { return .relinquishToReader(accessed: item.absolute, pid: pid) }
            if item.writingOptions.contains(.forDeleting) { return .accommodateDeletion }
            return .relinquishToWriter(accessed: item.absolute, pid: pid)
        }
    }

    /// Asks for relinquishing (skipping presenters that already missed a deadline in this coordination).
    func relinquishBlocking(
        _ items: [ResolvedItem], excluding: UInt64?, skipping: Set<String>, deadline: Duration
    ) -> ReacquirerList? {
        let messages = relinquishMessages(items, excluding: excluding, skipping: skipping)
        guard !messages.isEmpty else { return nil }
        let delivery = deliver(messages, deadline: deadline)
        delivery.waitBlocking(deadline: deadline)
        return delivery.reacquirers
    }

    /// The async form of `relinquishBlocking`.
    func relinquish(
        _ items: [ResolvedItem], excluding: UInt64?, skipping: Set<String>, deadline: Duration
    ) async -> ReacquirerList? {
        let messages = relinquishMessages(items, excluding: excluding, skipping: skipping)
        guard !messages.isEmpty else { return nil }
        let delivery = deliver(messages, deadline: deadline)
        await delivery.wait(deadline: deadline)
        return delivery.reacquirers
    }

    // MARK: Phase 3 — after the locks are released: reacquire, then report moves and changes.

    /// Runs the reacquirers and sends the change notifications; never waits.
    func finish(
        _ reacquirers: ReacquirerList?, items: [ResolvedItem], moves: [(from: String, to: String)],
        excluding: UInt64?, deadline: Duration
    ) {
        reacquirers?.runAll()
        let writes = items.filter { !$0.isRead }
        guard !writes.isEmpty else { return }
        var notes: [(PresenterMessage, PresenterEndpoint)] = []
        var movedLocal = false
        for (endpoint, path) in endpoints(excluding: excluding) {
            if let move = moves.first(where: { PresentedRelation(presented: path, accessed: $0.from).map { $0 != .container } ?? false }) {
                let newPath = move.to + path.dropFirst(move.from.count)
                notes.append((.didMove(to: newPath), endpoint))
                if case .local = endpoint { movedLocal = true }
                continue
            }
            for item in writes {
                switch PresentedRelation(presented: path, accessed: item.absolute) {
                case .same where !item.writingOptions.contains(.forDeleting): notes.append((.didChange, endpoint))
                case .container: notes.append((.subitemDidChange(at: item.absolute), endpoint))
                default: break
                }
            }
        }
        if !notes.isEmpty { _ = deliver(notes, deadline: deadline) }
        if movedLocal {
            // didMove updates the registration on its queue; republish once those have run.
            let registrations = local.withLock { Array($0.values) }
            let group = DispatchGroup()
            for registration in registrations { registration.queue.async(group: group) {} }
            group.notify(queue: .global()) { [self] in republish() }
        }
    }
}
