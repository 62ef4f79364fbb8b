// One connection between two endpoints of a rendezvous: length-prefixed frames with deadlines.
/// One connection to (or from) an endpoint of a `RendezvousDirectory`: frames of a 4-byte little-endian length and
/// that many bytes, each way. Used by one thread at a time; `close()` once.
package final class RendezvousConversation: @unchecked Sendable {  // one thread at a time (handed over through queues)
    private let socket: UnixSocket
    /// Bytes received past the last whole frame.
    private var buffer: [UInt8] = []

    init(_ socket: UnixSocket) { self.socket = socket }

    /// Sends `bytes` as one frame; whether all of it went (false when the other side has gone).
    package func send(_ bytes: [UInt8]) -> Bool {
        let count = UInt32(bytes.count)
        let frame = [UInt8(truncatingIfNeeded: count), UInt8(truncatingIfNeeded: count >> 8), UInt8(truncatingIfNeeded: count >> 16), UInt8(truncatingIfNeeded: count >> 24)] + bytes
        var sent = 0
        while sent < frame.count {
            let n = frame.withUnsafeBytes { all in try? socket.send(UnsafeRawBufferPointer(rebasing: all[sent...])) }
            guard let n, n > 0 else { return false }
            sent += n
        }
        return true
    }

    /// The next frame; nil at end of stream, on error, on a frame over `RendezvousDirectory.maximumFrame`, or when
    /// `timeoutMilliseconds` (-1: for ever) passed first.
    package func receive(timeoutMilliseconds: Int32) -> [UInt8]? {
        let deadline = timeoutMilliseconds < 0 ? Int64.max : monotonicMilliseconds() + Int64(timeoutMilliseconds)
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if buffer.count >= 4 {
                let length = Int(buffer[0]) | Int(buffer[1]) << 8 | Int(buffer[2]) << 16 | Int(buffer[3]) << 24
                guard length <= RendezvousDirectory.maximumFrame else { return nil }
                if buffer.count >= 4 + length {
                    let frame = Array(buffer[4..<(4 + length)])
                    buffer.removeSubrange(..<(4 + length))
                    return frame
                }
            }
            let left = deadline == .max ? -1 : deadline - monotonicMilliseconds()
            if deadline != .max && left <= 0 { return nil }
            let wait = Int32(clamping: left)
            guard (try? socket.waitReadable(timeoutMilliseconds: wait)) == true else { return nil }
            guard let n = chunk.withUnsafeMutableBytes({ try? socket.receive(into: $0) }), n > 0 else { return nil }
            buffer += chunk[..<n]
        }
    }

    /// Closes the connection (the other side reads end of stream).
    package func close() { socket.close() }
}
