// A `FileHandle`-shaped cursor over a protected file in the app container: the calls iOS code makes on a FileHandle,
// each a thin forward to the container's `ProtectedFileHandle` at the cursor's offset.
import DataProtection
import Foundation
internal import Locking

/// A `FileHandle`-shaped cursor over one protected file (`FileHandle(forReadingFrom:)` and its siblings on iOS).
///
/// Opened through `Container.open(_:forWriting:)` (entry point `containerOpen`), so the class's lock revokes it as it
/// revokes any handle: after `lock` returns, a `complete` file's next read or write fails `.fileReadNoPermission` /
/// `.fileWriteNoPermission`. Reads and writes are positional on the handle; the offset is the cursor's own.
public final class ProtectedFileCursor: Sendable {
    /// The open protected file.
    public let handle: ProtectedFileHandle
    /// The URL it was opened at.
    public let url: URL
    private let position = Locked<UInt64>(0)

    private init(_ url: URL, forWriting: Bool) throws(CocoaError) {
        let context = try AppContext.resolve(for: url, writing: forWriting)
        do throws(ProtectionError) {
            handle = try context.container.open(try context.container.relativePath(of: url), forWriting: forWriting)
        } catch { throw CocoaError(error, writing: forWriting, url: url) }
        self.url = url
    }

    /// Opens the protected file at `url` for reading (iOS: `FileHandle(forReadingFrom:)`).
    /// - Throws: `CocoaError` (`.fileReadNoPermission` while locked, `.fileReadNoSuchFile`, …), the `ProtectionError` underneath.
    public convenience init(forReadingFrom url: URL) throws(CocoaError) { try self.init(url, forWriting: false) }

    /// Opens the protected file at `url` for writing at offset 0 (iOS: `FileHandle(forWritingTo:)`).
    public convenience init(forWritingTo url: URL) throws(CocoaError) { try self.init(url, forWriting: true) }

    /// Opens the protected file at `url` for reading and writing (iOS: `FileHandle(forUpdating:)`).
    public convenience init(forUpdating url: URL) throws(CocoaError) { try self.init(url, forWriting: true) }

    /// The cursor's offset in the plaintext.
    public func offset() throws(CocoaError) -> UInt64 { position.withLock { $0 } }

    /// Moves the cursor to `offset` (past the end is allowed; a write there leaves zeros between, as on iOS).
    public func seek(toOffset offset: UInt64) throws(CocoaError) { position.withLock { $0 = offset } }

    /// Moves the cursor to the end of the plaintext and returns that offset.
    @discardableResult
    public func seekToEnd() throws(CocoaError) -> UInt64 {
        let end = try map(writing: false) { () throws(ProtectionError) in UInt64(try handle.size) }
        position.withLock { $0 = end }
        return end
    }

    /// Reads up to `count` bytes at the cursor and advances it; nil at the end of the file (iOS: `read(upToCount:)`).
    /// - Throws: `.fileReadNoPermission` when the class locked since the open, `.fileReadCorruptFile` for a damaged chunk.
    public func read(upToCount count: Int) throws(CocoaError) -> Data? {
        let at = position.withLock { $0 }
        let bytes = try map(writing: false) { () throws(ProtectionError) in
            try handle.read(at: Int64(clamping: at), count: Swift.min(count, Int(clamping: Swift.max(0, try handle.size - Int64(clamping: at)))))
        }
        guard !bytes.isEmpty else { return nil }
        position.withLock { $0 = at + UInt64(bytes.count) }
        return Data(bytes)
    }

    /// Reads from the cursor to the end of the file; nil when nothing is left (iOS: `readToEnd()`).
    public func readToEnd() throws(CocoaError) -> Data? { try read(upToCount: Int.max) }

    /// Writes `data` at the cursor and advances it (iOS: `write(contentsOf:)`).
    /// - Throws: `.fileWriteNoPermission` when the class locked since the open or the cursor is read-only.
    public func write<T: DataProtocol>(contentsOf data: T) throws(CocoaError) {
        let at = position.withLock { $0 }, bytes = [UInt8](data)
        try map(writing: true) { () throws(ProtectionError) in try handle.write(bytes, at: Int64(clamping: at)) }
        position.withLock { $0 = at + UInt64(bytes.count) }
    }

    /// Cuts or extends the file to `offset` and moves the cursor there (iOS: `truncate(atOffset:)`).
    public func truncate(atOffset offset: UInt64) throws(CocoaError) {
        try map(writing: true) { () throws(ProtectionError) in try handle.truncate(to: Int64(clamping: offset)) }
        position.withLock { $0 = offset }
    }

    /// Makes what was written durable (iOS: `synchronize()`).
    public func synchronize() throws(CocoaError) {
        try map(writing: true) { () throws(ProtectionError) in try handle.sync() }
    }

    /// Closes the file; its key material is wiped (iOS: `close()`).
    public func close() throws(CocoaError) { handle.close() }

    private func map<R>(writing: Bool, _ body: () throws(ProtectionError) -> R) throws(CocoaError) -> R {
        do throws(ProtectionError) { return try body() } catch { throw CocoaError(error, writing: writing, url: url) }
    }
}
