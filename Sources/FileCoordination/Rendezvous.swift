// The cross-process presenter rendezvous: who presents what, alive as long as its lock is held.
internal import SystemLayer
internal import Glibc
import Foundation
import Locking

/// A presenter process seen through the rendezvous directory.
struct RemotePeer: Sendable, Hashable {
    let id: String
    let socketPath: String
    let paths: [String]
}

/// The per-domain rendezvous directory `<lock directory>/presenters/`.
///
/// A process that presents items holds an OFD lock on `<id>.live` for its whole life, lists its
/// presented paths in `<id>.reg` (replaced atomically) and answers on the Unix socket `<id>.sock`.
/// A process whose `.live` lock is gone has died: the first coordinator to notice removes its
/// files. Every change bumps a shared generation counter, so coordinators rescan only then.
final class Rendezvous: Sendable {
    let directory: String
    let ownID: String
    /// An O_PATH (0o10000000, absent from Glibc's Swift module) descriptor of the directory, so socket addresses stay short however deep it is.
    private let directoryFD: Int32
    private let generation: SharedCounter
    private let cache = Locked<(generation: UInt64, peers: [RemotePeer])?>(nil)
    private let host = Locked<PresenterHost?>(nil)

    init(lockDirectory: String) throws(CoordinationError) {
        directory = lockDirectory + "/presenters"
        ownID = "\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
        try DomainState.makeDirectory(directory, naming: "presenter rendezvous")
        generation = try SharedCounter(path: directory + "/generation")
        directoryFD = Glibc.open(directory, 0o10000000 | O_DIRECTORY | O_CLOEXEC)
    }

    /// The address of a peer's socket: its path, or (when that exceeds sockaddr_un's 107 bytes)
    /// the same file reached through `/proc/self/fd/<directory descriptor>/`.
    func socketAddress(_ id: String) -> String {
        let path = "\(directory)/\(id).sock"
        if path.utf8.count <= 107 || directoryFD < 0 { return path }
        return "/proc/self/fd/\(directoryFD)/\(id).sock"
    }

    /// The live presenter processes other than this one; rescans only when the generation moved.
    func peers() -> [RemotePeer] {
        let current = generation.value
        if let cached = cache.withLock({ $0 }), cached.generation == current { return cached.peers }
        let peers = scan()
        cache.withLock { $0 = (current, peers) }
        return peers
    }

    private func scan() -> [RemotePeer] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        var peers: [RemotePeer] = []
        for name in names where name.hasSuffix(".live") {
            let id = String(name.dropLast(5))
            if id == ownID { continue }
            guard isAlive(id) else {
                forget(id)
                continue
            }
            let text = (try? String(contentsOfFile: "\(directory)/\(id).reg", encoding: .utf8)) ?? ""
            let paths = text.split(separator: "\n").map(String.init)
            if !paths.isEmpty { peers.append(RemotePeer(id: id, socketPath: socketAddress(id), paths: paths)) }
        }
        return peers
    }

    private func isAlive(_ id: String) -> Bool {
        let fd = Glibc.open("\(directory)/\(id).live", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { _ = Glibc.close(fd) }
        return OFDLock.isLocked(fd: fd, .exclusive, start: 0, length: 1) == .wouldBlock
    }

    /// Removes a dead (or unreachable) peer's files, after checking it is really dead.
    func forget(_ id: String) {
        guard !isAlive(id) else { return }
        for suffix in [".live", ".reg", ".sock"] { _ = unlink("\(directory)/\(id)\(suffix)") }
        generation.increment()
    }

    /// Publishes this process's presented paths, starting the listener on first use.
    /// - Throws: `.lockDirectoryUnavailable` when the socket or files cannot be created.
    func publish(_ paths: [String], registry: PresenterHub) throws(CoordinationError) {
        // One publisher at a time, so the last list written is the newest.
        try host.withLock { (host: inout PresenterHost?) throws(CoordinationError) in
            if host == nil {
                host = try PresenterHost(directory: directory, id: ownID, address: socketAddress(ownID), hub: registry)
            }
            let final = "\(directory)/\(ownID).reg"
            let temporary = final + ".tmp"
            let text = paths.map { $0 + "\n" }.joined()
            guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8)),
                rename(temporary, final) == 0
            else {
                throw CoordinationError(
                    .lockDirectoryUnavailable, path: final, message: "cannot publish presenters in '\(final)'", errno: errno)
            }
        }
        generation.increment()
    }
}
