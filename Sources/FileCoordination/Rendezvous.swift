// The cross-process presenter rendezvous: who presents what, on SystemLayer's rendezvous directory.
internal import SystemLayer
import Locking

/// A presenter process seen through the rendezvous directory.
struct RemotePeer: Sendable {
    let id: String
    let paths: [String]
    /// The rendezvous that reaches it.
    let rendezvous: RendezvousDirectory
}

/// The per-domain presenter rendezvous `<lock directory>/presenters/`, a `RendezvousDirectory`.
///
/// A process that presents items attaches one endpoint there (alive as long as its process: the primitive's
/// liveness lock) and publishes its presented paths, one per line, as the endpoint's record. Its requests are served
/// by `PresenterHost`, one thread per conversation. Every change moves the directory's membership generation, so
/// coordinators rescan only then; the primitive removes a dead process's endpoint when it meets it.
final class Rendezvous: Sendable {
    let directory: RendezvousDirectory
    let ownID = RendezvousDirectory.newEndpointID()
    private let cache = Locked<(generation: UInt64, peers: [RemotePeer])?>(nil)
    private let host = Locked<RendezvousEndpoint?>(nil)

    init(lockDirectory: String) throws(CoordinationError) {
        let path = lockDirectory + "/presenters"
        try DomainState.makeDirectory(path, naming: "presenter rendezvous")
        do throws(RendezvousDirectory.Failure) { directory = try RendezvousDirectory(path: path, words: 0, mode: 0o666) } catch {
            let page = path + "/" + RendezvousDirectory.pageName
            if case .pageForeign(let what) = error {
                throw CoordinationError(
                    .lockDirectoryUnavailable, path: page,
                    message: "the presenter state page '\(page)' is \(what), not a page file; remove it", errno: SystemError.notPermitted.rawValue)
            }
            let (step, code): (String, SystemError) = switch error {
            case .page(.open, let e): ("open", e)
            case .page(.inspect, let e): ("stat", e)
            case .page(.resize, let e): ("size", e)
            case .page(.map, let e): ("map", e)
            case .pageRefused, .pageForeign: ("open", .notPermitted)  // accepts any owner; a foreign file is handled above
            case .liveness(let e), .listen(let e), .publish(let e): ("open", e)  // not thrown by init
            }
            throw CoordinationError(
                .lockDirectoryUnavailable, path: page,
                message: "cannot \(step) the presenter state page '\(page)'; check the lock directory's permissions",
                errno: code.rawValue)
        }
    }

    /// The live presenter processes other than this one; rescans only when the generation moved.
    func peers() -> [RemotePeer] {
        let current = directory.generation
        if let cached = cache.withLock({ $0 }), cached.generation == current { return cached.peers }
        let peers = directory.peers(excluding: ownID).peers.compactMap { peer -> RemotePeer? in
            let paths = String(decoding: peer.record, as: UTF8.self).split(separator: "\n").map(String.init)
            return paths.isEmpty ? nil : RemotePeer(id: peer.id, paths: paths, rendezvous: directory)
        }
        cache.withLock { $0 = (current, peers) }
        return peers
    }

    /// Publishes this process's presented paths, attaching its endpoint on first use.
    /// - Throws: `.lockDirectoryUnavailable` when the endpoint or its record cannot be created.
    func publish(_ paths: [String], registry: PresenterHub) throws(CoordinationError) {
        // One publisher at a time, so the last list written is the newest.
        try host.withLock { (host: inout RendezvousEndpoint?) throws(CoordinationError) in
            do throws(RendezvousDirectory.Failure) {
                if host == nil {
                    let endpoint = try directory.attach(id: ownID)
                    endpoint.start(.threadPerConversation, requestTimeoutMilliseconds: 10_000) { request, conversation in
                        PresenterHost.serve(request, on: conversation, hub: registry)
                    }
                    host = endpoint
                }
                try host!.publish(Array(paths.map { $0 + "\n" }.joined().utf8))
            } catch {
                throw error.coordinationError(directory.path, ownID)
            }
        }
    }
}

extension RendezvousDirectory.Failure {
    /// The coordinator's error for a failure to attach or publish endpoint `id` in `directory`.
    func coordinationError(_ directory: String, _ id: String) -> CoordinationError {
        switch self {
        case .liveness(let e):
            CoordinationError(.lockDirectoryUnavailable, path: "\(directory)/\(id).live", message: "cannot lock the presenter liveness file '\(directory)/\(id).live'", errno: e.rawValue)
        case .listen(let e):
            CoordinationError(
                .lockDirectoryUnavailable, path: "\(directory)/\(id).sock",
                message: e == .fileNameTooLong
                    ? "the presenter socket path '\(directory)/\(id).sock' is longer than 107 bytes; choose a shorter lock directory"
                    : "cannot listen on the presenter socket '\(directory)/\(id).sock'",
                errno: e.rawValue)
        case .publish(let e), .page(_, let e):
            CoordinationError(.lockDirectoryUnavailable, path: "\(directory)/\(id).reg", message: "cannot publish presenters in '\(directory)/\(id).reg'", errno: e.rawValue)
        case .pageRefused, .pageForeign:  // thrown only by the rendezvous's init, which reports them itself
            CoordinationError(.lockDirectoryUnavailable, path: directory, message: "cannot use the presenter rendezvous '\(directory)'")
        }
    }
}
