// Unix-domain stream sockets: the notify half of the rendezvous (the shared page is the other half).
internal import CShims
public import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A Unix-domain stream socket, opened close-on-exec.
///
/// `RendezvousDirectory` is its one user: each endpoint listens, and every message is a connection of its own.
/// Addresses are paths of at most 107 bytes (`ENAMETOOLONG` otherwise). Sends never raise
/// `SIGPIPE` (`MSG_NOSIGNAL`). The socket is not closed for you: call `close()` once.
package struct UnixSocket: Sendable {
    package let descriptor: FileDescriptor

    package init(_ descriptor: FileDescriptor) { self.descriptor = descriptor }

    /// A stream socket listening at `path` (`bind` + `listen(backlog)`).
    package static func listening(at path: String, backlog: Int32) throws(Errno) -> UnixSocket {
        try UnixSocket(returned: dp_unix_listen(path, backlog))
    }

    /// A stream socket connected to the listener at `path`; `ECONNREFUSED` or `ENOENT` when nobody listens there.
    package static func connected(to path: String) throws(Errno) -> UnixSocket {
        try UnixSocket(returned: dp_unix_connect(path))
    }

    private init(returned fd: Int32) throws(Errno) {
        guard fd >= 0 else { throw Errno(errno) }
        descriptor = FileDescriptor(rawValue: fd)
    }

    /// `accept4(2)` of the next connection on a listening socket, retried on `EINTR`.
    package func accept() throws(Errno) -> UnixSocket { try UnixSocket(returned: dp_accept(descriptor.rawValue)) }

    /// `close(2)`, never retried.
    package func close() { _ = Glibc.close(descriptor.rawValue) }

    // MARK: Streams

    /// One `send(2)` on a connected stream socket: may send fewer bytes than asked.
    @discardableResult
    package func send(_ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int {
        let n = Glibc.send(descriptor.rawValue, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
        guard n >= 0 else { throw Errno(errno) }
        return n
    }

    /// One `recv(2)` on a connected stream socket: 0 at end of stream.
    package func receive(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        let n = Glibc.recv(descriptor.rawValue, buffer.baseAddress, buffer.count, 0)
        guard n >= 0 else { throw Errno(errno) }
        return n
    }

    /// `poll(2)` for readability (or hang-up), retried on `EINTR`; false when `timeoutMilliseconds` (-1: for ever) passed.
    package func waitReadable(timeoutMilliseconds: Int32) throws(Errno) -> Bool {
        let rc = dp_poll_readable(descriptor.rawValue, timeoutMilliseconds)
        guard rc >= 0 else { throw Errno(errno) }
        return rc > 0
    }
}
