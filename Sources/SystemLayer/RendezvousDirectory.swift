// The one IPC primitive: a named directory with a shared state page and one endpoint per attached process.
public import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A rendezvous directory: a shared state page (typed atomic words) and one endpoint per attached process.
///
/// The live lock and the file coordinator's presenters both build on it; neither maps a page or opens a socket
/// itself. The directory holds:
/// - `state`: one page mapped `MAP_SHARED`. Word 0 is the membership generation (+1 whenever an endpoint attaches,
///   publishes its record or is removed), so a process rescans the directory only when it moved; words 1… belong to
///   the user (`word(_:)`, `userBase`).
/// - per endpoint `<id>`: `<id>.live`, OFD-locked by its process for its whole life (the kernel drops the lock when
///   the process dies, so liveness needs no heartbeat); `<id>.sock`, a Unix stream socket that listens; and
///   optionally `<id>.reg`, a record the endpoint publishes (replaced by rename).
///
/// A message is one frame (4-byte little-endian length, then the bytes) on a connection of its own; a reply is one
/// frame back on it, and a conversation may go on (the coordinator keeps a relinquish's connection as its lease).
/// An endpoint whose `.live` lock is gone belongs to a dead process: whoever meets it removes its files.
///
/// Who may send: whoever can connect to the sockets, that is whoever can search the directory; the caller makes the
/// directory with the permissions that say who that is (the live lock: 0700, its user only).
/// Socket addresses longer than `sockaddr_un`'s 107 bytes are reached through an `O_PATH` descriptor of the
/// directory (`/proc/self/fd/<n>/<id>.sock`), so a deep directory still works.
package final class RendezvousDirectory: Sendable {
    /// The directory's path.
    package let path: String
    /// The shared state page (word 0: the membership generation).
    package let page: SharedPage
    /// The mode of the files this directory creates (state page, liveness files, records).
    let mode: mode_t
    /// An `O_PATH` descriptor of the directory, for socket addresses past 107 bytes (-1 if it could not be opened).
    private let directoryFD: Int32

    /// The largest frame a receiver accepts (a longer one ends the conversation).
    package static let maximumFrame = 1 << 20

    /// Why the rendezvous could not be set up or an endpoint attached.
    package enum Failure: Error {
        /// Mapping the state page failed at `step`.
        case page(SharedPage.Step, Errno)
        /// The state page's owner or permissions were refused by `accept`.
        case pageRefused
        /// Something other than a page file is at the state page's name (the phrase says what).
        case pageForeign(String)
        /// The endpoint's liveness file could not be created or locked.
        case liveness(Errno)
        /// The endpoint's socket could not listen (`ENAMETOOLONG`: the address exceeds 107 bytes).
        case listen(Errno)
        /// The endpoint's record could not be written.
        case publish(Errno)
    }

    /// The state page's file name, which carries its layout's version: a page another layout left in the directory
    /// (an older library's runtime state, which outlives it in /tmp until a reboot) is ignored, never misread.
    package static let pageName = "state.2"

    /// Opens the rendezvous in `path` (a directory the caller made), mapping its state page with `words` user words.
    /// - Parameters:
    ///   - mode: the mode of the files it creates.
    ///   - accept: judges an existing state page by owner and permission bits before it is used.
    /// - Throws: `.page` or `.pageRefused` when the state page cannot be used.
    package init(path: String, words: Int, mode: mode_t, accept: (_ owner: uid_t, _ permissions: mode_t) -> Bool = { _, _ in true }) throws(Failure) {
        self.path = path
        self.mode = mode
        let size = max(4096, (words + 1) * 8)
        do throws(SharedPage.Failure) { page = try SharedPage(path: path + "/" + Self.pageName, size: size, mode: mode, accept: accept) } catch {
            switch error {
            case .refused: throw .pageRefused
            case .foreign(let what): throw .pageForeign(what)
            case .system(let step, let e): throw .page(step, e)
            }
        }
        directoryFD = Glibc.open(path, 0o10000000 | O_DIRECTORY | O_CLOEXEC)  // O_PATH, absent from Glibc's Swift module
    }

    deinit { if directoryFD >= 0 { _ = Glibc.close(directoryFD) } }

    /// The first user word (word 1 of the page): callers keep it to reach their words with no hop through this object.
    @inlinable
    package var userBase: UnsafeMutableRawPointer { page.base + 8 }

    /// User word `index` (0-based, after the generation).
    @inlinable @inline(__always)
    package func word(_ index: Int) -> AtomicWord64 { page.word(at: 8 * (index + 1)) }

    /// The membership generation: moves whenever an endpoint attaches, publishes or is removed.
    package var generation: UInt64 { page.word(at: 0).load() }

    func membershipChanged() { page.word(at: 0).fetchAdd(1) }

    func file(_ id: String, _ suffix: String) -> String { "\(path)/\(id)\(suffix)" }

    /// The socket address of endpoint `id`: its path, or the same file through the directory descriptor past 107 bytes.
    func address(_ id: String) -> String {
        let socket = file(id, ".sock")
        if socket.utf8.count <= 107 || directoryFD < 0 { return socket }
        return "/proc/self/fd/\(directoryFD)/\(id).sock"
    }

    // MARK: Peers

    /// One attached endpoint as another process sees it.
    package struct Peer: Sendable {
        package let id: String
        /// Its published record (empty when it published none).
        package let record: [UInt8]
    }

    /// Whether the process of endpoint `id` still holds its liveness lock.
    package func isAlive(_ id: String) -> Bool {
        let fd = Glibc.open(file(id, ".live"), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)  // a planted link is no endpoint
        guard fd >= 0 else { return false }
        defer { _ = Glibc.close(fd) }
        return OFDLock.isLocked(fd: fd, .exclusive, start: 0, length: 1) == .wouldBlock
    }

    /// Removes endpoint `id`'s files if its process is dead; whether it did.
    @discardableResult
    package func removeIfDead(_ id: String) -> Bool {
        guard !isAlive(id) else { return false }
        for suffix in [".sock", ".reg", ".live"] { _ = Glibc.unlink(file(id, suffix)) }
        membershipChanged()
        return true
    }

    /// The live endpoints other than `excluded`, with their records; dead ones met on the way are removed.
    /// - Parameter records: whether to read each endpoint's record.
    package func peers(excluding excluded: String? = nil, records: Bool = true) -> (peers: [Peer], removed: Int) {
        var ids = Set<String>()
        for name in (try? SystemFileIO().directoryNames(path)) ?? [] {
            for suffix in [".sock", ".live"] where name.hasSuffix(suffix) { ids.insert(String(name.dropLast(suffix.count))) }
        }
        var peers: [Peer] = []
        var removed = 0
        for id in ids.sorted() where id != excluded {
            if removeIfDead(id) { removed += 1; continue }
            peers.append(Peer(id: id, record: records ? readRecord(id) : []))
        }
        return (peers, removed)
    }

    private func readRecord(_ id: String) -> [UInt8] {
        let fd = Glibc.open(file(id, ".reg"), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return [] }
        defer { _ = Glibc.close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < Self.maximumFrame {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            bytes += chunk[..<n]
        }
        return bytes
    }

    // MARK: Sending

    /// Opens a conversation with endpoint `id`; nil when nobody answers there (its files removed if its process died).
    package func connect(to id: String) -> RendezvousConversation? {
        do throws(Errno) { return RendezvousConversation(try UnixSocket.connected(to: address(id))) } catch {
            if error == .connectionRefused || error == .noSuchFileOrDirectory { removeIfDead(id) }
            return nil
        }
    }

    /// What one `post` came to.
    package enum Outcome: Sendable {
        /// Sent; no reply was asked for.
        case delivered
        case replied([UInt8])
        case timedOut
        /// Nobody answers at that endpoint (removed if its process died).
        case unreachable
    }

    /// Sends `message` to endpoint `id` on a connection of its own and, with `replyWithinMilliseconds`, waits that long
    /// for one reply frame.
    package func post(_ message: [UInt8], to id: String, replyWithinMilliseconds: Int32? = nil) -> Outcome {
        guard let conversation = connect(to: id) else { return .unreachable }
        defer { conversation.close() }
        guard conversation.send(message) else { return .unreachable }
        guard let wait = replyWithinMilliseconds else { return .delivered }
        return conversation.receive(timeoutMilliseconds: wait).map { .replied($0) } ?? .timedOut
    }

    /// What a `broadcast` came to.
    package struct BroadcastReport: Sendable {
        /// Endpoints that took the message.
        package var delivered = 0
        /// Endpoints that replied in time (when replies were awaited).
        package var replied = 0
        /// Endpoints that took the message but did not reply in time.
        package var timedOut = 0
        /// Endpoints of dead processes removed.
        package var removed = 0
    }

    /// Sends `message` to every endpoint (the caller's own included) and, with `replyWithinMilliseconds`, waits until
    /// then for every reply: the messages go out first, then the replies are collected against one deadline.
    package func broadcast(_ message: [UInt8], replyWithinMilliseconds: Int32? = nil) -> BroadcastReport {
        let (peers, removed) = peers(records: false)
        var report = BroadcastReport(removed: removed)
        var waiting: [RendezvousConversation] = []
        for peer in peers {
            guard let conversation = connect(to: peer.id) else {
                if !isAlive(peer.id) { report.removed += 1 }
                continue
            }
            guard conversation.send(message) else { conversation.close(); continue }
            report.delivered += 1
            if replyWithinMilliseconds == nil { conversation.close() } else { waiting.append(conversation) }
        }
        guard let wait = replyWithinMilliseconds else { return report }
        let deadline = monotonicMilliseconds() + Int64(wait)
        for conversation in waiting {
            let left = Int32(clamping: max(0, deadline - monotonicMilliseconds()))
            if conversation.receive(timeoutMilliseconds: left) != nil { report.replied += 1 } else { report.timedOut += 1 }
            conversation.close()
        }
        return report
    }

    // MARK: Attaching

    /// Attaches this process: locks `<id>.live`, listens on `<id>.sock`; `start` the endpoint to receive.
    /// - Parameter id: the endpoint's name in the directory (default: `<pid>-<random hex>`).
    /// - Throws: `.liveness` or `.listen` (`ENAMETOOLONG` when even the short address is too long).
    package func attach(id: String = RendezvousDirectory.newEndpointID()) throws(Failure) -> RendezvousEndpoint {
        let endpoint = try RendezvousEndpoint(directory: self, id: id)
        membershipChanged()
        return endpoint
    }

    /// A fresh endpoint name: `<pid>-<32 random bits in hex>`.
    package static func newEndpointID() -> String { "\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))" }
}

/// CLOCK_MONOTONIC in milliseconds.
func monotonicMilliseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}
