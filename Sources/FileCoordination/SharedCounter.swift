// A 64-bit counter in an mmap'ed file, shared by every process of a domain.
internal import CShims
internal import Glibc

/// A generation counter other processes bump when their presenter registrations change.
struct SharedCounter: @unchecked Sendable {
    // The mapping is never unmapped and is only touched through atomic C calls.
    private let address: UnsafeMutablePointer<UInt64>

    /// Maps (creating if needed) the 8-byte counter file at `path`.
    /// - Throws: `.lockDirectoryUnavailable` when the file cannot be created or mapped.
    init(path: String) throws(CoordinationError) {
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o666)
        guard fd >= 0 else { throw Self.failure(path, "open") }
        defer { _ = Glibc.close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw Self.failure(path, "stat") }
        if info.st_size < 8, ftruncate(fd, 8) != 0 { throw Self.failure(path, "size") }
        let mapped = mmap(nil, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        guard let mapped, mapped != MAP_FAILED else { throw Self.failure(path, "map") }
        address = mapped.assumingMemoryBound(to: UInt64.self)
    }

    var value: UInt64 { dp_atomic_load_u64(address) }

    func increment() { _ = dp_atomic_fetch_add_u64(address, 1) }

    private static func failure(_ path: String, _ step: String) -> CoordinationError {
        let code = errno
        return CoordinationError(
            .lockDirectoryUnavailable, path: path,
            message: "cannot \(step) the presenter generation file '\(path)'; check the lock directory's permissions",
            errno: code)
    }
}
