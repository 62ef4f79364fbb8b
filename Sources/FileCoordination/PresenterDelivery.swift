// Delivering one batch of presenter messages with a deadline, and running reacquirers exactly once.
internal import SystemLayer
import Dispatch
import Foundation
import Locking
import Synchronization

/// Where a message goes: a registration of this process, or a presenter process.
enum PresenterEndpoint: Sendable {
    case local(PresenterRegistration)
    /// A presenter process; `queue` is this process's serial queue for that peer, so the messages
    /// of one access (relinquish, reacquire, did-change) and of later accesses arrive in order.
    case remote(RemotePeer, presentedPath: String, queue: DispatchQueue)

    /// Identifies the endpoint within one coordination.
    var key: String {
        switch self {
        case .local(let registration): "l\(registration.id)"
        case .remote(let peer, let path, _): "r\(peer.id)\(path)"
        }
    }
}

/// Reacquirers collected from relinquish callbacks; each runs exactly once, even if it arrives late.
final class ReacquirerList: Sendable {
    private let state = Locked<(finished: Bool, pending: [@Sendable () -> Void])>((false, []))

    /// Adds a reacquirer to run on `queue`; runs it at once if the access has already ended.
    func add(_ reacquire: @escaping @Sendable () -> Void, on queue: DispatchQueue?) {
        let job: @Sendable () -> Void = { if let queue { queue.async(execute: reacquire) } else { reacquire() } }
        let runNow = state.withLock { state -> Bool in
            if state.finished { return true }
            state.pending.append(job)
            return false
        }
        if runNow { job() }
    }

    /// Ends the access: runs every reacquirer collected so far, and later ones as they arrive.
    func runAll() {
        let jobs = state.withLock { state in
            state.finished = true
            let jobs = state.pending
            state.pending = []
            return jobs
        }
        for job in jobs { job() }
    }
}

/// Sends one batch of messages in parallel and waits for the replies until a deadline.
final class PresenterDelivery: Sendable {
    let reacquirers = ReacquirerList()
    private let group = DispatchGroup()
    /// Endpoints whose awaited reply has not come yet.
    private let unanswered = Locked<Set<String>>([])

    /// The endpoints that did not answer in time (read after waiting): skipped for the rest of the coordination.
    var missed: Set<String> { unanswered.withLock { $0 } }

    /// Starts delivering `message` to `endpoint`.
    /// - Parameter deadline: for remote endpoints, how long the socket exchange may take.
    func send(_ message: PresenterMessage, to endpoint: PresenterEndpoint, deadline: Duration) {
        let reacquirers = self.reacquirers
        let key = endpoint.key
        if message.awaitsReply { unanswered.withLock { _ = $0.insert(key) } }
        let answered: @Sendable () -> Void = { [self] in _ = unanswered.withLock { $0.remove(key) } }
        switch endpoint {
        case .local(let registration):
            if message.awaitsReply { group.enter() }
            let group = self.group
            registration.queue.async {
                if let reacquire = message.deliver(to: registration) { reacquirers.add(reacquire, on: registration.queue) }
                if message.holdsAccess { reacquirers.add(PresenterMessage.endOfAccess(for: registration), on: nil) }
                if message.awaitsReply {
                    answered()
                    group.leave()
                }
            }
        case .remote(let peer, let path, let queue):
            if message.awaitsReply { group.enter() }
            let group = self.group
            queue.async {
                let outcome = RemoteCall.exchange(message, presentedPath: path, peer: peer, deadline: deadline)
                switch outcome {
                case .unreachable: break
                case .answered(let connection?):
                    reacquirers.add({ RemoteCall.reacquire(connection, deadline: deadline) }, on: queue)
                    answered()
                case .answered(nil): answered()
                case .timedOut: break
                }
                if message.awaitsReply { group.leave() }
            }
        }
    }

    /// Blocks until every awaited reply arrived or `deadline` passed.
    func waitBlocking(deadline: Duration) {
        _ = group.wait(timeout: .now() + .nanoseconds(Int(clamping: deadline.nanoseconds)))
    }

    /// Suspends until every awaited reply arrived or `deadline` passed; blocks no thread.
    func wait(deadline: Duration) async {
        let once = Atomic<Bool>(false)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resume: @Sendable () -> Void = {
                if !once.exchange(true, ordering: .acquiringAndReleasing) { continuation.resume() }
            }
            group.notify(queue: .global(), execute: resume)
            DispatchQueue.global().asyncAfter(
                deadline: .now() + .nanoseconds(Int(clamping: deadline.nanoseconds)), execute: resume)
        }
    }
}

/// The requesting side of one exchange with a presenter process, over the rendezvous.
enum RemoteCall {
    enum Outcome {
        /// The peer answered; for a relinquish, the open conversation that is the access's lease.
        case answered(RendezvousConversation?)
        case timedOut
        case unreachable
    }

    static func exchange(_ message: PresenterMessage, presentedPath: String, peer: RemotePeer, deadline: Duration) -> Outcome {
        // An unreachable peer whose process died is removed by the rendezvous (the generation moves, coordinators rescan).
        guard let conversation = peer.rendezvous.connect(to: peer.id) else { return .unreachable }
        guard conversation.send(Array(message.wireLine(presentedPath: presentedPath).utf8)) else {
            conversation.close()
            return .unreachable
        }
        guard conversation.receive(timeoutMilliseconds: milliseconds(deadline)) == Array("ok".utf8) else {
            conversation.close()
            return .timedOut
        }
        if message.holdsAccess { return .answered(conversation) }
        conversation.close()
        return .answered(nil)
    }

    /// Ends a relinquish lease: the presenter queues its reacquirers, then acknowledges (so later
    /// messages to it, sent after this returns, reach its presenters after the reacquirers).
    static func reacquire(_ conversation: RendezvousConversation, deadline: Duration) {
        _ = conversation.send(Array("reacquire".utf8))
        _ = conversation.receive(timeoutMilliseconds: milliseconds(deadline))
        conversation.close()
    }

    private static func milliseconds(_ deadline: Duration) -> Int32 { Int32(clamping: deadline.nanoseconds / 1_000_000) }
}
