// The presenter side of the rendezvous: a Unix socket that turns requests into local callbacks.
internal import SystemLayer
internal import Glibc
import Dispatch
import Foundation

/// Listens on `<id>.sock` and delivers requests to this process's registrations.
///
/// One thread accepts; each connection gets its own thread, which delivers the request, replies
/// `ok`, and, for a relinquish, keeps the connection as the lease of the access: the reacquirers
/// run when the coordinator sends `reacquire` or its connection closes (for example because it died).
final class PresenterHost: Sendable {
    private let listener: UnixSocket
    private let liveness: Int32

    init(directory: String, id: String, address: String, hub: PresenterHub) throws(CoordinationError) {
        let livePath = "\(directory)/\(id).live"
        let live = Glibc.open(livePath, O_RDWR | O_CREAT | O_CLOEXEC, 0o666)
        guard live >= 0, OFDLock.trySet(fd: live, .exclusive, start: 0, length: 1) == .done else {
            throw CoordinationError(
                .lockDirectoryUnavailable, path: livePath, message: "cannot lock the presenter liveness file '\(livePath)'",
                errno: errno)
        }
        let socketPath = "\(directory)/\(id).sock"
        _ = unlink(socketPath)
        let socket: UnixSocket
        do throws(SystemError) { socket = try UnixSocket.listening(at: address, backlog: 64) } catch {
            let code = error.errno
            _ = Glibc.close(live)
            throw CoordinationError(
                .lockDirectoryUnavailable, path: socketPath,
                message: code == ENAMETOOLONG
                    ? "the presenter socket path '\(socketPath)' is longer than 107 bytes; choose a shorter lock directory"
                    : "cannot listen on the presenter socket '\(socketPath)'",
                errno: code)
        }
        listener = socket
        liveness = live
        let thread = Thread {
            while true {
                let connection: UnixSocket
                do throws(SystemError) { connection = try socket.accept() } catch {
                    if error.errno == ECONNABORTED { continue }
                    return
                }
                let worker = Thread { PresenterHost.serve(connection, hub: hub) }
                worker.name = "FileCoordination.PresenterHost.connection"
                worker.start()
            }
        }
        thread.name = "FileCoordination.PresenterHost"
        thread.start()
    }

    private static func serve(_ connection: UnixSocket, hub: PresenterHub) {
        var reader = LineReader(connection)
        defer { connection.close() }
        guard let line = reader.next(timeoutMS: 10_000), let parsed = PresenterMessage.parse(line[...]) else { return }
        let message = parsed.message
        let registrations = hub.localRegistrations(presenting: parsed.presentedPath)
        let group = DispatchGroup()
        let reacquirers = ReacquirerList()
        for registration in registrations {
            group.enter()
            registration.queue.async {
                if let reacquire = message.deliver(to: registration) { reacquirers.add(reacquire, on: registration.queue) }
                if message.holdsAccess { reacquirers.add(PresenterMessage.endOfAccess(for: registration), on: nil) }
                group.leave()
            }
        }
        // Callbacks the coordinator waits for are acknowledged once they ran; notifications once
        // they are queued, so the next message on this peer's queue cannot overtake them.
        if message.awaitsReply { _ = group.wait(timeout: .now() + .seconds(120)) }
        _ = connection.send("ok\n")
        guard message.holdsAccess else {
            reacquirers.runAll()
            return
        }
        // The connection is the access's lease: "reacquire", EOF or an error all end it. The
        // reacquirers are queued before the acknowledgement, so they run before later messages.
        _ = reader.next(timeoutMS: -1)
        reacquirers.runAll()
        _ = connection.send("ok\n")
    }
}

/// Reads newline-terminated lines from a socket with a timeout.
struct LineReader {
    let socket: UnixSocket
    private var buffer: [UInt8] = []

    init(_ socket: UnixSocket) { self.socket = socket }

    /// The next line without its newline; nil on EOF, error or timeout (`timeoutMS` < 0 waits forever).
    mutating func next(timeoutMS: Int32) -> String? {
        let deadline = timeoutMS < 0 ? UInt64.max : monotonicNow() &+ UInt64(timeoutMS) * 1_000_000
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            let now = monotonicNow()
            if now >= deadline { return nil }
            let wait = timeoutMS < 0 ? Int32(-1) : Int32(min((deadline - now) / 1_000_000 + 1, UInt64(Int32.max)))
            guard (try? socket.waitReadable(timeoutMilliseconds: wait)) == true else { return nil }
            var chunk = [UInt8](repeating: 0, count: 4096)
            guard let count = chunk.withUnsafeMutableBytes({ try? socket.receive(into: $0) }), count > 0 else { return nil }
            buffer.append(contentsOf: chunk[..<count])
        }
    }
}
