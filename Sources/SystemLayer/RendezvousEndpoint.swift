// This process's endpoint in a rendezvous directory: its liveness lock, its socket and its receive loop.
public import SystemPackage
import Synchronization
import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// This process's endpoint in a `RendezvousDirectory`: alive while it holds `<id>.live`, reached at `<id>.sock`.
///
/// `start` runs the receive loop on a thread of the endpoint's own; `stop` wakes it at once (a connection to its own
/// socket) and ends it, and the loop then removes the endpoint's files; `stop(waiting: true)` returns only after that.
package final class RendezvousEndpoint: Sendable {
    /// The endpoint's name in the directory.
    package let id: String
    let directory: RendezvousDirectory
    private let listener: UnixSocket
    /// The descriptor that holds the liveness lock (the kernel drops the lock when the process dies).
    private let liveness: Int32
    private let stopping = Atomic<Bool>(false)
    /// Set by the receive loop once it has removed the endpoint's files (`stop(waiting:)` waits for it).
    private let ended = Atomic<Bool>(false)
    /// Set by `start`: a loop that never started has nothing to wait for.
    private let started = Atomic<Bool>(false)
    private let endedSignal = DispatchSemaphore(value: 0)
    /// The receive loop's thread (`pthread_self` as a number; 0 before it starts): a stop from it cannot wait for itself.
    private let loopThread = Atomic<UInt>(0)

    /// How a received conversation is served.
    package enum Serving: Sendable {
        /// On the receive loop's thread, one after another in arrival order.
        case inline
        /// Each on a thread of its own (for handlers that wait long, or hold the conversation open).
        case threadPerConversation
    }

    init(directory: RendezvousDirectory, id: String) throws(RendezvousDirectory.Failure) {
        self.directory = directory
        self.id = id
        let livePath = directory.file(id, ".live")
        let live = Glibc.open(livePath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, directory.mode)
        guard live >= 0 else { throw .liveness(Errno(rawValue: errno)) }
        guard OFDLock.trySet(fd: live, .exclusive, start: 0, length: 1) == .done else {
            let code = errno
            _ = Glibc.close(live)
            throw .liveness(Errno(rawValue: code))
        }
        _ = Glibc.unlink(directory.file(id, ".sock"))
        do throws(Errno) { listener = try UnixSocket.listening(at: directory.address(id), backlog: 64) } catch {
            _ = Glibc.unlink(livePath)
            _ = Glibc.close(live)
            throw .listen(error)
        }
        liveness = live
    }

    /// Starts the receive loop on a thread of its own.
    /// - Parameters:
    ///   - serving: where each conversation is served.
    ///   - requestTimeoutMilliseconds: how long a new conversation may take to send its first frame.
    ///   - tick: called before every wait; returns how long to wait (ms, -1 for ever), or nil to stop the loop.
    ///   - handle: serves one conversation's first frame; may reply and go on. The conversation is closed after it.
    package func start(
        _ serving: Serving, requestTimeoutMilliseconds: Int32, tick: @escaping @Sendable () -> Int32? = { -1 },
        handle: @escaping @Sendable (_ request: [UInt8], _ conversation: RendezvousConversation) -> Void
    ) {
        started.store(true, ordering: .releasing)
        detachThread { [self] in
            loopThread.store(UInt(pthread_self()), ordering: .releasing)
            while !stopping.load(ordering: .acquiring) {
                guard let timeout = tick() else { break }
                guard let readable = try? listener.waitReadable(timeoutMilliseconds: timeout) else { break }
                guard readable, let connection = try? listener.accept() else { continue }
                // `stop`'s wake-up call (or a sender racing it): the loop ends without serving it.
                if stopping.load(ordering: .acquiring) { connection.close(); break }
                let conversation = RendezvousConversation(connection)
                let serve: @Sendable () -> Void = {
                    defer { conversation.close() }
                    guard let request = conversation.receive(timeoutMilliseconds: requestTimeoutMilliseconds) else { return }
                    handle(request, conversation)
                }
                switch serving {
                case .inline: serve()
                case .threadPerConversation: detachThread(serve)
                }
            }
            close()
            ended.store(true, ordering: .releasing)
            endedSignal.signal()
        }
    }

    /// Ends the receive loop now: marks it stopping and wakes it with a connection to its own socket.
    ///
    /// A conversation being served finishes first (a lock's acknowledgement is never cut off).
    /// - Parameter waiting: return only once the loop has ended and removed the endpoint's files (ignored when called
    ///   from the loop itself, e.g. by an event handler, which cannot wait for its own end).
    package func stop(waiting: Bool = false) {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return wait(waiting) }
        if let wake = try? UnixSocket.connected(to: directory.address(id)) { wake.close() }  // refused only once it ended
        wait(waiting)
    }

    private func wait(_ waiting: Bool) {
        guard waiting, started.load(ordering: .acquiring), loopThread.load(ordering: .acquiring) != UInt(pthread_self()) else { return }
        if ended.load(ordering: .acquiring) { return }
        endedSignal.wait()
        endedSignal.signal()  // a second waiter (or a later stop) passes too
    }

    /// Removes the endpoint's files, then lets go of the socket and the liveness lock.
    private func close() {
        for suffix in [".sock", ".reg", ".live"] { _ = Glibc.unlink(directory.file(id, suffix)) }
        listener.close()
        _ = Glibc.close(liveness)
        directory.membershipChanged()
    }

    /// Replaces the endpoint's record with `record` through the one atomic replace, and bumps the generation.
    ///
    /// Without its fsyncs: a record describes a running process and dies with it, so only the rename matters (readers
    /// never see half of it). The replace's locked, exclusively created temporary means a link planted beside the
    /// record (the coordinator's lock directory may be shared) is never written through.
    /// - Throws: `.publish` when it cannot be written.
    package func publish(_ record: [UInt8]) throws(RendezvousDirectory.Failure) {
        let io = SystemFileIO()
        do throws(SystemError) {
            let replace = try AtomicReplace(replacing: directory.file(id, ".reg"), mode: directory.mode, flags: O_WRONLY, io: io)
            defer {
                replace.discard()  // nothing once renamed; before the close, whose lock makes the name ours
                io.close(replace.fd)
            }
            try record.span.bytes.withUnsafeBytes { (b) throws(SystemError) in try io.writeFully(replace.fd, from: b, at: 0) }
            try replace.commit(syncingFile: false, syncingDirectory: false, keepingAttributes: false)
        } catch {
            throw .publish(error)
        }
        directory.membershipChanged()
    }
}

/// Runs `body` on a new detached thread.
package func detachThread(_ body: @escaping @Sendable () -> Void) {
    final class Body: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
    let box = Unmanaged.passRetained(Body(body))
    var tid = pthread_t()
    pthread_create(&tid, nil, { raw in
        Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue().run()
        return nil
    }, box.toOpaque())
    pthread_detach(tid)
}
