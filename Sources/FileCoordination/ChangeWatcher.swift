// Changes made without coordination, reported to this process's presenters after the fact (inotify).
internal import SystemLayer
internal import Glibc
import Dispatch
import Foundation
import Locking
internal import PathSyntax

/// Watches the directories of presented items with inotify and reports writes, creations,
/// renames and deletions of a presented item that no coordinated access accounts for, as
/// `presentedItemDidChange()`, about 20 ms after the last event of a burst.
///
/// While a coordinated access concerns a presented item (from the presenter's save or relinquish
/// callback until the access ends) and for a short grace period after, events for that item are
/// not reported: the coordinated path reports them itself.
final class ChangeWatcher: Sendable {
    private struct State {
        var directories: [PathKey: Int32] = [:]
        var watches: [Int32: String] = [:]
        /// Paths a coordinated access accounts for, until the given monotonic time.
        var quietUntil: [PathKey: UInt64] = [:]
        var pending: Set<PathKey> = []
    }

    static let grace: UInt64 = 200_000_000
    private static let io = SystemFileIO()
    private static let debounce: DispatchTimeInterval = .milliseconds(20)

    private let events: Inotify
    private let state = Locked(State())
    private let report: @Sendable (String) -> Void

    /// Starts the watcher; nil when inotify is unavailable (changes are then simply not reported).
    /// - Parameter report: called with the path of a presented item that changed without coordination.
    init?(report: @escaping @Sendable (String) -> Void) {
        guard let events = try? Inotify() else { return nil }
        self.events = events
        self.report = report
        let thread = Thread { [self] in readEvents() }
        thread.name = "FileCoordination.ChangeWatcher"
        thread.start()
    }

    /// Watches the directory that contains `path` (once per directory).
    func watch(_ path: String) {
        let directory = PathKey(parentDirectory(of: path))
        state.withLock { state in
            guard state.directories[directory] == nil else { return }
            let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB)
            guard let wd = try? events.watch(directory.path, mask: mask) else { return }
            state.directories[directory] = wd
            state.watches[wd] = directory.path
        }
    }

    /// Mutes reports for `path` until `deadline` (monotonic nanoseconds; `.max` until told otherwise).
    func quiet(_ path: String, until deadline: UInt64) {
        state.withLock { $0.quietUntil[PathKey(path)] = deadline }
    }

    private func isQuiet(_ path: String, _ state: inout State) -> Bool {
        guard let until = state.quietUntil[PathKey(path)] else { return false }
        if until > monotonicNow() { return true }
        state.quietUntil[PathKey(path)] = nil
        return false
    }

    private func readEvents() {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            // EINTR is retried inside `read`; any other error, or the end of the stream, ends the watcher.
            let read: Result<Int, SystemError> = buffer.withUnsafeMutableBytes { b in
                do throws(SystemError) { return .success(try Self.io.read(events.fd, into: b)) } catch { return .failure(error) }
            }
            guard let count = try? read.get(), count > 0 else { return }
            var offset = 0
            let header = MemoryLayout<inotify_event>.size
            while offset + header <= count {
                let (wd, length) = buffer.withUnsafeBytes { raw -> (Int32, Int) in
                    let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    return (event.wd, Int(event.len))
                }
                let nameBytes = buffer[(offset + header)..<min(offset + header + length, count)]
                let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                offset += header + length
                guard !name.isEmpty, let directory = state.withLock({ $0.watches[wd] }) else { continue }
                schedule(directory == "/" ? "/" + name : directory + "/" + name)
            }
        }
    }

    /// Reports `path` once its burst of events is over, unless a coordinated access accounts for it.
    private func schedule(_ path: String) {
        let first = state.withLock { state -> Bool in
            if isQuiet(path, &state) { return false }
            return state.pending.insert(PathKey(path)).inserted
        }
        guard first else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.debounce) { [self] in
            let due = state.withLock { state -> Bool in
                state.pending.remove(PathKey(path))
                return !isQuiet(path, &state)
            }
            if due { report(path) }
        }
    }
}
