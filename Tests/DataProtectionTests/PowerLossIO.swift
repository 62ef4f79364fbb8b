import SystemLayer
import DataProtection
import Locking

#if canImport(Glibc)
import Glibc
#endif
import PathSyntax

/// A `FileIO` over real files that remembers everything not yet fsynced, so a test can cut the
/// power after any call and "reboot" into a state a real disk could present (PowerLossTests).
///
/// The model (in the spirit of SQLite's crash tests and of ALICE's file-system abstraction):
///
/// - File data. Every write or truncate since a file's last `fsync` is kept as a version of the
///   whole file (version 0 is the content as of that fsync). At the cut, each 4 KiB page of the
///   file independently takes its bytes from a random version, and the size from another random
///   version; bytes a chosen version does not have are zeros. So unsynced writes may be dropped,
///   reordered across pages (a later write survives while an earlier one is lost), a file may be
///   extended with zeros where its data never reached the disk, or cut short. A page is never torn
///   inside itself, and nothing fsynced is ever lost. Bytes a truncate cut off come back with their
///   last contents if the truncate itself is lost (a truncate frees blocks only once it is durable).
///   This is a superset of what ext4 presents: with `data=ordered` it never shows the zeros, but
///   XFS and ext4 `data=writeback` can.
/// - Directories. Creates, renames and unlinks in a directory since its last `fsync` form a list;
///   at the cut a random prefix of each directory's list survives and the rest is undone, newest
///   first (ext4's journal commits metadata in order, so a later rename never survives an earlier
///   one in the same directory; directories are independent). An un-fsynced new file may thus
///   vanish, or survive with any of its unsynced contents (empty, if none reached the disk); an
///   un-fsynced rename over a file may revert, bringing the old file back. Fsyncing a file makes
///   its data durable, not its name, as POSIX says (ext4 often persists the name too; the model
///   does not rely on it). Files unlinked or replaced are kept under `stash` (hard links) so an undo can restore them.
/// - The cut. After the `cutAfter`-th disk-changing call (`open` with `O_CREAT`, `pwrite`,
///   `ftruncate`, `fsync`, `rename`, `unlink`, the attribute copy; the same count as crash-worker's)
///   every call but `close` fails with EIO, as if the process had stopped there; then
///   `powerCut(root:using:)` rewrites the real files into the rebooted state.
///
/// Not modelled: renames between directories (the library renames within one), torn sectors inside a
/// page, `syncfs` (rotation makes its batches durable with it, so rotation is not run here), and
/// directories created outside the seam (they count as durable).
final class PowerLossIO: FileIO, @unchecked Sendable {
    struct FileID: Hashable { var dev: UInt64, ino: UInt64 }
    enum DirOp {
        case create(String)
        case rename(from: String, to: String, replaced: String?)  // replaced: the stash link of what `to` named
        case unlink(String, stash: String)
    }
    struct Model {
        var count = 0
        var cut = false
        var fds: [Int32: FileID] = [:]
        var directoryFDs: [Int32: FileID] = [:]
        /// Versions of each file changed since its last fsync; [0] is the durable content.
        var files: [FileID: [[UInt8]]] = [:]
        var directories: [FileID: (path: String, ops: [DirOp])] = [:]
        var stashed = 0
        var journaled = false
        /// The numbers of the calls that order the disk (fsyncs, creates, renames, unlinks), counting from 1.
        var barriers: [Int] = []
        /// Each disk-changing call, described (when `traced`): what a failure report names.
        var traced = false
        var calls: [String] = []
        var names: [Int32: String] = [:]
    }

    let real = SystemFileIO()
    let cutAfter: Int?
    let stash: String
    private let model = Locked(Model())

    /// - Parameters:
    ///   - cutAfter: the power goes after this many disk-changing calls (0: before any); nil: never.
    ///   - stash: an empty directory on the same file system, outside the tree under test.
    ///   - traced: keep a description of each disk-changing call (`calls`).
    init(cutAfter: Int?, stash: String, traced: Bool = false) {
        self.cutAfter = cutAfter
        self.stash = stash
        model.withLock {
            $0.cut = cutAfter == 0
            $0.traced = traced
        }
    }

    /// Disk-changing calls made so far.
    var count: Int { model.withLock { $0.count } }
    /// Whether a rollback journal (`.<name>.dpjournal`) was opened: in-place writes are crash-safe only with one.
    var journaled: Bool { model.withLock { $0.journaled } }
    /// The numbers of the calls so far that order the disk: fsyncs, creates, renames and unlinks (PowerLossTests samples around them).
    var barriers: [Int] { model.withLock { $0.barriers } }
    /// The disk-changing calls so far, described, when the seam was made with `traced`.
    var calls: [String] { model.withLock { $0.calls } }

    // MARK: FileIO

    func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 {
        try model.withLock { (m) throws(SystemError) -> Int32 in
            try live(m)
            let existed = access(path, F_OK) == 0
            if path.hasSuffix(".dpjournal") { m.journaled = true }
            let fd = try real.open(path, flags: flags, mode: mode)
            let id = try Self.id(fd: fd)
            m.names[fd] = lastComponent(of: path)
            if flags & O_DIRECTORY != 0 {
                m.directoryFDs[fd] = id
                if m.directories[id] == nil { m.directories[id] = (path, []) }
            } else {
                m.fds[fd] = id
            }
            if flags & O_CREAT != 0 {
                if !existed {
                    m.files[id] = [[]]  // a new file is durably empty, once its name is
                    try record(&m, .create(lastComponent(of: path)), in: path)
                }
                tick(&m, barrier: !existed, "open\(existed ? "" : " O_CREAT new") \(lastComponent(of: path))")
            }
            return fd
        }
    }

    func close(_ fd: Int32) {
        model.withLock { m in
            m.fds[fd] = nil
            m.names[fd] = nil
            m.directoryFDs[fd] = nil
        }
        real.close(fd)
    }

    func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        try model.withLock { (m) throws(SystemError) -> Int in
            try live(m)
            return try real.pread(fd, into: buffer, at: offset)
        }
    }

    func pwrite(_ fd: Int32, from buffer: UnsafeRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        try model.withLock { (m) throws(SystemError) -> Int in
            try live(m)
            var version = try current(&m, fd)
            let n = try real.pwrite(fd, from: buffer, at: offset)
            let end = Int(offset) + n
            if version.count < end { version += [UInt8](repeating: 0, count: end - version.count) }
            version.replaceSubrange(Int(offset)..<end, with: buffer[..<n])
            m.files[m.fds[fd]!]!.append(version)
            let file = name(m, fd)
            tick(&m, "pwrite \(file) at \(offset), \(n) bytes")
            return n
        }
    }

    func fsync(_ fd: Int32) throws(SystemError) {
        try model.withLock { (m) throws(SystemError) in
            try live(m)
            try real.fsync(fd)
            if let d = m.directoryFDs[fd] {
                m.directories[d]?.ops = []
            } else if let f = m.fds[fd], let versions = m.files[f] {
                m.files[f] = [versions.last!]
            }
            let file = name(m, fd)
            tick(&m, barrier: true, "fsync \(file)")
        }
    }

    func ftruncate(_ fd: Int32, to size: Int64) throws(SystemError) {
        try model.withLock { (m) throws(SystemError) in
            try live(m)
            var version = try current(&m, fd)
            try real.ftruncate(fd, to: size)
            if Int(size) < version.count { version.removeSubrange(Int(size)...) } else { version += [UInt8](repeating: 0, count: Int(size) - version.count) }
            m.files[m.fds[fd]!]!.append(version)
            let file = name(m, fd)
            tick(&m, "ftruncate \(file) to \(size)")
        }
    }

    func size(_ fd: Int32) throws(SystemError) -> Int64 {
        try model.withLock { (m) throws(SystemError) -> Int64 in
            try live(m)
            return try real.size(fd)
        }
    }

    func rename(_ from: String, to: String) throws(SystemError) {
        try model.withLock { (m) throws(SystemError) in
            try live(m)
            precondition(parentDirectory(of: from) == parentDirectory(of: to), "PowerLossIO models renames within one directory")
            let replaced = access(to, F_OK) == 0 ? try keep(&m, to) : nil
            try real.rename(from, to: to)
            try record(&m, .rename(from: lastComponent(of: from), to: lastComponent(of: to), replaced: replaced), in: to)
            tick(&m, barrier: true, "rename \(lastComponent(of: from)) to \(lastComponent(of: to))")
        }
    }

    func unlink(_ path: String) throws(SystemError) {
        try model.withLock { (m) throws(SystemError) in
            try live(m)
            let kept = try keep(&m, path)
            try real.unlink(path)
            try record(&m, .unlink(lastComponent(of: path), stash: kept), in: path)
            tick(&m, barrier: true, "unlink \(lastComponent(of: path))")
        }
    }

    // The `*at` calls: the same model, by the path of the directory the descriptor was opened as (through `open`).

    func openAt(_ directory: Int32, _ name: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 {
        try open(try path(directory, name), flags: flags, mode: mode)
    }

    func renameAt(_ directory: Int32, _ from: String, to: String) throws(SystemError) {
        try rename(try path(directory, from), to: try path(directory, to))
    }

    func unlinkAt(_ directory: Int32, _ name: String) throws(SystemError) { try unlink(try path(directory, name)) }

    func identityAt(_ directory: Int32, _ name: String) throws(SystemError) -> (device: UInt64, inode: UInt64) {
        try model.withLock { (m) throws(SystemError) in try live(m) }
        return try real.identityAt(directory, name)
    }

    func copyUserAttributes(at directory: Int32, from name: String, to fd: Int32) throws(SystemError) {
        try model.withLock { (m) throws(SystemError) in
            try live(m)
            try real.copyUserAttributes(at: directory, from: name, to: fd)
            tick(&m, "copy attributes from \(name)")
        }
    }

    /// `name` in the directory open as `fd`, which the library opened through this seam.
    private func path(_ fd: Int32, _ name: String) throws(SystemError) -> String {
        guard let dir = model.withLock({ m in m.directoryFDs[fd].flatMap { m.directories[$0]?.path } }) else { throw SystemError(EBADF) }
        return "\(dir)/\(name)"
    }

    // MARK: The cut

    /// Cuts the power (if it is still on) and rewrites the files below `root` into a state after reboot.
    func powerCut<R: RandomNumberGenerator>(root: String, using rng: inout R) throws {
        let m = model.withLock { m in
            m.cut = true
            return m
        }
        // A reboot: the page cache is gone, so a log's marks of the old boot no longer count (FORMAT.md §6.7.6).
        BootIdentity.simulateReboot()
        // Directories: keep a prefix of each one's unsynced operations, undo the rest newest first.
        for (_, dir) in m.directories where !dir.ops.isEmpty {
            let keep = Self.pick(dir.ops.count, &rng)
            for op in dir.ops[keep...].reversed() {
                switch op {
                case .create(let name):
                    try check(Glibc.unlink("\(dir.path)/\(name)"), "unlink", name)
                case .rename(let from, let to, let replaced):
                    try check(Glibc.rename("\(dir.path)/\(to)", "\(dir.path)/\(from)"), "rename", to)
                    if let replaced { try check(link(replaced, "\(dir.path)/\(to)"), "link", to) }
                case .unlink(let name, let kept):
                    try check(link(kept, "\(dir.path)/\(name)"), "link", name)
                }
            }
        }
        // File data: each page from a random unsynced version, the size from another.
        for path in Self.regularFiles(below: root) {
            var st = stat()
            guard lstat(path, &st) == 0, let versions = m.files[FileID(dev: UInt64(st.st_dev), ino: UInt64(st.st_ino))], versions.count > 1 else { continue }
            let size = versions[Self.pick(versions.count - 1, &rng)].count
            var bytes = [UInt8](repeating: 0, count: size)
            var page = 0
            while page < size {
                // Bytes the chosen version lacks were cut off by a truncate, which frees nothing until it
                // is durable: they come from the latest earlier version that has them (zeros if none does).
                var filled = page
                let end = min(page + 4096, size)
                for v in versions[...Self.pick(versions.count - 1, &rng)].reversed() where v.count > filled {
                    let upTo = min(end, v.count)
                    bytes.replaceSubrange(filled..<upTo, with: v[filled..<upTo])
                    filled = upTo
                    if filled == end { break }
                }
                page += 4096
            }
            let fd = Glibc.open(path, O_WRONLY | O_TRUNC | O_CLOEXEC)
            try check(fd, "open", path)
            defer { Glibc.close(fd) }
            var done = 0
            while done < bytes.count {
                let n = bytes.withUnsafeBytes { Glibc.pwrite(fd, $0.baseAddress! + done, $0.count - done, off_t(done)) }
                try check(n < 0 ? -1 : 0, "write", path)
                done += n
            }
        }
        for name in Self.names(in: stash) { _ = Glibc.unlink("\(stash)/\(name)") }
    }

    /// 0 (nothing survives), `n` (everything) or anything in between, each a third of the time.
    static func pick<R: RandomNumberGenerator>(_ n: Int, _ rng: inout R) -> Int {
        switch Int.random(in: 0..<3, using: &rng) {
        case 0: return 0
        case 1: return n
        default: return Int.random(in: 0...n, using: &rng)
        }
    }

    // MARK: Internals (with the model locked)

    private func name(_ m: Model, _ fd: Int32) -> String { m.names[fd] ?? "fd \(fd)" }

    private func live(_ m: Model) throws(SystemError) { if m.cut { throw SystemError(EIO) } }

    private func tick(_ m: inout Model, barrier: Bool = false, _ call: @autoclosure () -> String) {
        m.count += 1
        if barrier { m.barriers.append(m.count) }
        if m.traced { m.calls.append(call()) }
        if let cutAfter, m.count >= cutAfter { m.cut = true }
    }

    /// The file's latest version, read from disk when this is its first change since the test started.
    private func current(_ m: inout Model, _ fd: Int32) throws(SystemError) -> [UInt8] {
        guard let id = m.fds[fd] else { throw SystemError(EBADF) }
        if let v = m.files[id]?.last { return v }
        var bytes = [UInt8](repeating: 0, count: Int(try real.size(fd)))
        let got: Result<Int, SystemError> = bytes.withUnsafeMutableBytes { b in
            do throws(SystemError) { return .success(try real.readFully(fd, into: b, at: 0)) } catch { return .failure(error) }
        }
        bytes.removeSubrange(try got.get()...)
        m.files[id] = [bytes]
        return bytes
    }

    private func record(_ m: inout Model, _ op: DirOp, in path: String) throws(SystemError) {
        let dir = parentDirectory(of: path)
        var st = stat()
        guard stat(dir, &st) == 0 else { throw SystemError(errno) }
        let id = FileID(dev: UInt64(st.st_dev), ino: UInt64(st.st_ino))
        m.directories[id, default: (dir, [])].ops.append(op)
    }

    /// Hard-links `path` into the stash, so undoing its unlink or replacement can bring it back.
    private func keep(_ m: inout Model, _ path: String) throws(SystemError) -> String {
        m.stashed += 1
        let kept = "\(stash)/\(m.stashed)"
        guard link(path, kept) == 0 else { throw SystemError(errno) }
        return kept
    }

    private static func id(fd: Int32) throws(SystemError) -> FileID {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw SystemError(errno) }
        return FileID(dev: UInt64(st.st_dev), ino: UInt64(st.st_ino))
    }

    private func check(_ rc: Int32, _ what: String, _ path: String) throws {
        if rc < 0 { throw PowerCutError(message: "\(what) \(path) during the power cut: \(String(cString: strerror(errno)))") }
    }

    static func names(in dir: String) -> [String] {
        guard let h = opendir(dir) else { return [] }
        defer { closedir(h) }
        var out: [String] = []
        while let e = readdir(h) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { out.append(name) }
        }
        return out
    }

    static func regularFiles(below dir: String) -> [String] {
        var out: [String] = []
        for name in names(in: dir) {
            let p = "\(dir)/\(name)"
            var st = stat()
            guard lstat(p, &st) == 0 else { continue }
            if st.st_mode & S_IFMT == S_IFDIR { out += regularFiles(below: p) } else if st.st_mode & S_IFMT == S_IFREG { out.append(p) }
        }
        return out
    }
}

struct PowerCutError: Error { let message: String }
