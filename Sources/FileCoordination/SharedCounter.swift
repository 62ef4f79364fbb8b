// A 64-bit counter in an mmap'ed file, shared by every process of a domain.
internal import SystemLayer
internal import Glibc

/// A generation counter other processes bump when their presenter registrations change.
struct SharedCounter: Sendable {
    private let page: SharedPage

    /// Maps (creating if needed) the 8-byte counter file at `path`.
    /// - Throws: `.lockDirectoryUnavailable` when the file cannot be created or mapped.
    init(path: String) throws(CoordinationError) {
        do throws(SharedPage.Failure) { page = try SharedPage(path: path, size: 8, mode: 0o666) } catch {
            let (step, code): (String, Int32) = switch error {
            case .system(.open, let e): ("open", e.errno)
            case .system(.inspect, let e): ("stat", e.errno)
            case .system(.resize, let e): ("size", e.errno)
            case .system(.map, let e): ("map", e.errno)
            case .refused: ("open", EPERM)  // accepts any file: not reached
            }
            throw CoordinationError(
                .lockDirectoryUnavailable, path: path,
                message: "cannot \(step) the presenter generation file '\(path)'; check the lock directory's permissions",
                errno: code)
        }
    }

    var value: UInt64 { page.word(at: 0).load() }

    func increment() { page.word(at: 0).fetchAdd(1) }
}
