#if canImport(Glibc)
import Glibc
#endif

/// Where the new bytes of a handle write come from.
enum WriteSource {
    /// Zeros (a file extended by `truncate`).
    case zeros
    /// Byte `k` of the write is at `pointer + k`.
    case memory(UnsafeRawPointer)
    /// Byte `k` of the write is at offset `base + k` of the regular file open as `fd`, read with `pread`, so the
    /// threads sealing a batch each read their own pieces of it.
    case file(Int32, base: Int64)

    /// Copies bytes `k..<k+count` of the write to `destination`; returns how many there were (fewer only when a
    /// file source ends early).
    func copy(_ k: Int64, count: Int, to destination: UnsafeMutableRawPointer) throws(SystemError) -> Int {
        switch self {
        case .zeros:
            destination.initializeMemory(as: UInt8.self, repeating: 0, count: count)
            return count
        case .memory(let pointer):
            destination.copyMemory(from: pointer + Int(k), byteCount: count)
            return count
        case .file(let fd, let base):
            var done = 0
            while done < count {
                let n = Glibc.pread(fd, destination + done, count - done, off_t(base + k + Int64(done)))
                if n < 0 && errno == EINTR { continue }
                if n < 0 { throw SystemError(errno) }
                if n == 0 { break }
                done += n
            }
            return done
        }
    }
}
