import DataProtectionKeys
import SystemLayer
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
            // The input is not the protected file: it is read with the real system calls, not the handle's seam.
            return try SystemFileIO().readFully(fd, into: UnsafeMutableRawBufferPointer(start: destination, count: count), at: base + k)
        }
    }
}
