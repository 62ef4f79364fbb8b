// Unix-domain sockets: the notify half of cross-process state (the shared page is the other half).
internal import CShims
public import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A Unix-domain socket, datagram or stream, opened close-on-exec.
///
/// The live lock sends its events as datagrams between bound sockets; the coordinator talks to presenter processes
/// over stream connections. Addresses are paths of at most 107 bytes (`ENAMETOOLONG` otherwise). Sends never raise
/// `SIGPIPE` (`MSG_NOSIGNAL`). The socket is not closed for you: call `close()` once.
package struct UnixSocket: Sendable {
    package let descriptor: FileDescriptor

    package init(_ descriptor: FileDescriptor) { self.descriptor = descriptor }

    /// A datagram socket bound at `path` (`socket(AF_UNIX, SOCK_DGRAM)` + `bind`); the path is not removed on close.
    package static func datagram(boundAt path: String) throws(Errno) -> UnixSocket {
        try UnixSocket(returned: dp_unix_dgram_bind(path))
    }

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

    // MARK: Datagrams

    /// Sends one datagram to the socket bound at `path`, retried on `EINTR`.
    /// - Throws: `ECONNREFUSED` (or `ENOENT`) when no process holds that socket any more.
    @discardableResult
    package func send(_ bytes: UnsafeRawBufferPointer, to path: String) throws(Errno) -> Int {
        let n = dp_unix_dgram_send(descriptor.rawValue, path, bytes.baseAddress, UInt(bytes.count))
        guard n >= 0 else { throw Errno(errno) }
        return n
    }

    /// Waits at most `timeoutMilliseconds` (-1: for ever) for one datagram and receives it into `buffer`.
    /// - Parameter sender: whether to return the path the sender is bound at (nil when it is not bound).
    /// - Returns: the datagram's length and sender, or nil on timeout.
    package func receiveDatagram(into buffer: UnsafeMutableRawBufferPointer, timeoutMilliseconds: Int32, sender: Bool = false)
        throws(Errno) -> (count: Int, sender: String?)?
    {
        var from: String?
        let n = withUnsafeTemporaryAllocation(of: CChar.self, capacity: 110) { address in
            address[0] = 0
            let n = dp_unix_dgram_recv(descriptor.rawValue, buffer.baseAddress, UInt(buffer.count), timeoutMilliseconds, sender ? address.baseAddress : nil)
            if n > 0, sender, address[0] != 0 { from = String(cString: address.baseAddress!) }
            return n
        }
        guard n >= 0 else { throw Errno(errno) }
        return n == 0 ? nil : (n, from)
    }

    // MARK: Streams

    /// One `send(2)` on a connected stream socket: may send fewer bytes than asked.
    @discardableResult
    package func send(_ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int {
        let n = Glibc.send(descriptor.rawValue, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
        guard n >= 0 else { throw Errno(errno) }
        return n
    }

    /// Sends the UTF-8 of `text` in one `send(2)`; whether all of it went.
    package func send(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in (try? send(UnsafeRawBufferPointer(bytes))) == bytes.count }
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
