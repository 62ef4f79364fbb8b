@_spi(Testing) import DataProtectionKeys  // Keybag and DeviceSecret: testing SPI only so the keybag fuzzer can reach them
import SystemLayer
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif

/// Progress of a class-key rotation, reported after each file.
public struct RotationProgress: Sendable {
    public let done: Int
    public let total: Int
    public let path: String
}

/// What a rotation did.
public struct RotationReport: Sendable {
    public let protectionClass: ProtectionClass
    public let from: [UInt32]
    public let to: UInt32
    /// Headers rewritten in this run.
    public let rewrapped: Int
    /// Files listed that no longer exist.
    public let missing: Int
    /// Whether the run stopped early because `progress` returned false (resume by calling `rotate` again).
    public let interrupted: Bool
    /// Whether a journal from an earlier, interrupted run was resumed.
    public let resumed: Bool
}

/// The rotation journal: which rotation is under way and which files are done, so a crash loses no work.
///
/// Text, one record per line: `dp-rotation-v1 <class> <to> <from,…>`, then
/// `file <hex path>` lines, `end`, then `done <index>` lines appended as files
/// are rewrapped and made durable (in batches: rewrapped headers, `syncfs`,
/// then the records, then an fsync of the journal). The head is written
/// atomically (up to `end`). Rewrapping is idempotent, so a lost `done` line
/// costs one header check, never a wrong key.
struct RotationJournal: Sendable {
    var protectionClass: ProtectionClass
    var to: UInt32
    var from: [UInt32]
    var files: [String]
    var done: Set<Int> = []

    func head() -> [UInt8] {
        var s = "dp-rotation-v1 \(protectionClass.rawValue) \(to) \(from.map(String.init).joined(separator: ","))\n"
        for f in files { s += "file " + f.utf8.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() + "\n" }
        return Array((s + "end\n").utf8)
    }

    /// Reads the journal at `location`, nil when no rotation is under way.
    /// - Throws: `.corruptKeybag` for a malformed journal (with the fix).
    static func read(_ location: DomainLocation, io: any FileIO) throws(ProtectionError) -> RotationJournal? {
        let path = location.journalPath
        let bytes: [UInt8]
        do throws(ProtectionError) {
            bytes = try DurableFile.read(path, limit: 1 << 30, io: io, tooLarge: corrupt(path, "too large"))
        } catch where error.code == .notFound { return nil }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        let h = lines.first?.split(separator: " ") ?? []
        guard h.count == 4, h[0] == "dp-rotation-v1", let cr = UInt8(h[1]), let c = ProtectionClass(rawValue: cr), let to = UInt32(h[2]) else {
            throw corrupt(path, "bad first line")
        }
        let from = h[3].split(separator: ",").compactMap { UInt32($0) }
        var j = RotationJournal(protectionClass: c, to: to, from: from, files: [])
        var ended = false
        for line in lines.dropFirst() where !line.isEmpty {
            if !ended {
                if line == "end" { ended = true; continue }
                guard line.hasPrefix("file "), let p = hexDecode(line.dropFirst(5)) else { throw corrupt(path, "bad file line") }
                j.files.append(p)
            } else if line.hasPrefix("done "), let i = Int(line.dropFirst(5)), i >= 0, i < j.files.count {
                j.done.insert(i)
            }  // a torn last `done` line from a crash is ignored: that file is checked again
        }
        guard ended else { throw corrupt(path, "no end record") }
        return j
    }

    private static func hexDecode(_ s: Substring) -> String? {
        let u = Array(s.utf8)
        guard u.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        var i = 0
        while i < u.count {
            guard let b = UInt8(String(decoding: u[i..<(i + 2)], as: UTF8.self), radix: 16) else { return nil }
            out.append(b); i += 2
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func corrupt(_ path: String, _ what: String) -> ProtectionError {
        ProtectionError(.corruptKeybag, "the rotation journal '\(path)' is corrupt (\(what)); delete it and run `dpctl rotate` again with the same paths (rewrapping is idempotent)", path: path)
    }
}

extension ProtectionDomain {
    /// Rotates class `c` to a new key generation: rewraps the per-file key of every protected file of that class under `paths`.
    ///
    /// Contents are not re-encrypted: each file's 176-byte header is rewritten.
    /// A journal in the home records the rotation and each finished file; if
    /// the process dies, calling `rotate` again (any `paths`) resumes it. The
    /// old generation stays in the keybag until every listed file is done,
    /// then it is removed from the keybag and the key store. Files of the class
    /// that are *not* under `paths` become unreadable at that point: list every
    /// directory that holds the domain's files.
    ///
    /// - Parameters:
    ///   - c: the class to rotate.
    ///   - paths: files and directories to search (recursively) for protected files of `c`;
    ///     required to start a rotation, ignored when resuming one. The journal records
    ///     absolute paths; a listed file that no longer exists counts as done (deleted),
    ///     so do not move files of the class while a rotation is unfinished.
    ///   - passphrase: needed to wrap the new class key into the keybag.
    ///   - progress: called after each file; return false to stop early (resumable).
    /// - Throws: `.wrongPassphrase`; `.invalidArgument` when another class's rotation is unfinished;
    ///   the first file's error when some files could not be rewrapped (the journal and the old generation stay).
    public func rotate(
        _ c: ProtectionClass, paths: [String], passphrase: borrowing SecretBytes, progress: (RotationProgress) -> Bool = { _ in true }
    ) throws(ProtectionError) -> RotationReport {
        var bag = try cache.bag()
        let device = try DeviceSecret.load(for: bag.contents, at: location, io: io)
        let kek = try bag.passphraseKEK(passphrase, device, at: location)
        var keys = try bag.unwrapPassphraseClasses(kek)
        for g in bag.generations[.none] ?? [] { if let k = try bag.unwrapNone(g, device) { keys.append(k) } }

        var journal: RotationJournal
        let resumed: Bool
        if let j = try RotationJournal.read(location, io: io) {
            guard j.protectionClass == c else {
                throw ProtectionError(.invalidArgument, "a rotation of class \(j.protectionClass) is unfinished; finish it first with `dpctl rotate --class \(j.protectionClass.name)`", path: location.journalPath)
            }
            journal = j
            resumed = true
        } else {
            // With no paths every file of the class would lose its key when the old generation goes.
            guard !paths.isEmpty else {
                throw ProtectionError(.invalidArgument, "name the files or directories that hold the domain's \(c) files: `dpctl rotate --class \(c.name) DIR...`; files of the class outside them become unreadable when the rotation finishes")
            }
            let gens = bag.generations[c] ?? []
            let to = (gens.last ?? 0) + 1
            journal = RotationJournal(protectionClass: c, to: to, from: gens, files: try protectedFiles(of: c, under: paths, excluding: to))
            try DurableFile.write(journal.head(), to: location.journalPath, mode: 0o600, io: io)  // journal first: a crash before the keybag write resumes with the same generation
            resumed = false
        }
        // The new generation enters the keybag (and the key store, if the class is unlocked) before any file uses it.
        if bag.contents.entry(c, journal.to) == nil {
            let fresh = try ClassKey.generate(c, generation: journal.to)
            try bag.add(fresh, kek: kek, device: device)
            try DeviceSecretRotation.writing(under: device, for: id, at: location, io: io) { () throws(ProtectionError) in try bag.save(location, device, kek: kek, io: io) }
            cache.update(bag)
            keys.append(fresh)
        }
        let newKey = keys.first { $0.protectionClass == c && $0.generation == journal.to }!
        if c != .none, let old = journal.from.last, try store.isPresent(c, old) {
            let remaining = try store.deadline().map { UInt32(clamping: max(1, $0 - Int64(time(nil)))) }
            try store.install([newKey], timeout: c == .completeUntilFirstUserAuthentication ? nil : remaining)
        }

        // The rotation's own copy of the class keys (it has the passphrase), locked with the domain: a lock while
        // it runs drops them, and the rewraps left fail `.locked` (the journal resumes them after unlock).
        let rotationKeys = InMemoryClassKeys(keys.filter { $0.protectionClass == c })
        let registration = liveLock.revocation.register(rotationKeys)
        defer { liveLock.revocation.unregister(slot: registration) }
        let rewrapper = ProtectedFiles(keys: rotationKeys, options: files.options, io: io, sealsPerKeyNonce: AEADNonceMode.maxSealsPerKeyNonce)
        var rewrapped = 0, missing = 0, interrupted = false
        var failures: [ProtectionError] = []
        // Headers are rewritten without a per-file fsync; each batch is made durable with one
        // syncfs per file system before its `done` records are appended, so a recorded file is
        // really done, and an unrecorded one is simply checked again on resume.
        let batch = DurableBatch(journal: try JournalAppender(location.journalPath, io: io))
        for (i, path) in journal.files.enumerated() where !journal.done.contains(i) {
            do throws(ProtectionError) {
                if case .rewrapped = try rewrapper.rewrap(path, to: c, generation: journal.to, sync: false) { rewrapped += 1 }
                try batch.add(i, path)
            } catch where error.code == .notFound {
                missing += 1
                try batch.add(i, nil)
            } catch {
                failures.append(error)
            }
            journal.done.formUnion(batch.recorded)
            if !progress(RotationProgress(done: journal.done.count + batch.pendingCount, total: journal.files.count, path: path)) { interrupted = true; break }
        }
        try batch.flush()
        journal.done.formUnion(batch.recorded)
        try batch.close()
        let report = RotationReport(protectionClass: c, from: journal.from, to: journal.to, rewrapped: rewrapped, missing: missing, interrupted: interrupted, resumed: resumed)
        if interrupted { return report }
        if let first = failures.first {
            throw ProtectionError(first.code, "\(failures.count) of \(journal.files.count) files could not be rewrapped (first: \(first.message)); generation \(journal.from.map(String.init).joined(separator: ",")) of class \(c) is kept; fix or remove those files and run `dpctl rotate --class \(c.name)` again to finish", path: first.path, underlying: first)
        }
        // Every listed file is done: retire the old generations, then the journal.
        bag.contents.entries.removeAll { $0.protectionClass == c && journal.from.contains($0.generation) }
        // A passphrase change while the files were rewrapped replaced the device secret: the journal resumes it.
        try DeviceSecretRotation.writing(under: device, for: id, at: location, io: io) { () throws(ProtectionError) in try bag.save(location, device, kek: kek, io: io) }
        cache.update(bag)
        try store.retire(c, generations: journal.from)
        do throws(SystemError) {
            try io.unlink(location.journalPath)
            try io.syncDirectory(of: location.journalPath)
        } catch { throw ProtectionError.errno(error.errno, "remove", location.journalPath) }
        return report
    }

    /// Protected files of class `c` (not yet at generation `excluding`) under `paths`, walking directories; sorted, unique.
    func protectedFiles(of c: ProtectionClass, under paths: [String], excluding g: UInt32) throws(ProtectionError) -> [String] {
        var out = Set<String>()
        for p in paths {
            // Absolute paths in the journal: a resume from another working directory must find the same files.
            let root: String
            do throws(SystemError) { root = try io.resolvedPath(p) } catch { throw ProtectionError.errno(error.errno, "find", p) }
            try FileTree.walk(root) { (file) throws(ProtectionError) in
                guard let info = try? files.info(file) else { return }  // not protected, or unreadable: not ours to rotate
                if info.protectionClass == c && info.classKeyGeneration != g { out.insert(file) }
            }
        }
        return out.sorted()
    }
}

/// Rewrapped files waiting to be made durable together, then recorded as done in the journal.
private final class DurableBatch {
    static let size = 1024
    let journal: JournalAppender
    private var pending: [Int] = []
    private var fileSystems: [UInt64: String] = [:]  // st_dev → a path on it, for syncfs
    private(set) var recorded: Set<Int> = []
    var pendingCount: Int { pending.count }

    init(journal: JournalAppender) { self.journal = journal }

    /// Adds file `index` (at `path`, or nil when it no longer exists); flushes every `size` files.
    func add(_ index: Int, _ path: String?) throws(ProtectionError) {
        pending.append(index)
        if let path {
            if let st = try? journal.io.status(atPath: path), fileSystems[UInt64(st.st_dev)] == nil { fileSystems[UInt64(st.st_dev)] = path }
        }
        if pending.count >= Self.size { try flush() }
    }

    /// syncfs on every file system touched, then the `done` records, then an fsync of the journal.
    func flush() throws(ProtectionError) {
        guard !pending.isEmpty else { return }
        for path in fileSystems.values {
            do throws(SystemError) {
                let fd = try journal.io.open(path, flags: O_RDONLY, mode: 0)
                defer { journal.io.close(fd) }
                try journal.io.syncFileSystem(fd)
            } catch { throw ProtectionError.errno(error.errno, "sync the file system of", path) }
        }
        for i in pending { try journal.append(i) }
        try journal.sync()
        recorded.formUnion(pending)
        pending.removeAll()
        fileSystems.removeAll()
    }

    func close() throws(ProtectionError) { try journal.close() }
}

/// Appends `done <index>` records to the rotation journal.
private final class JournalAppender {
    let fd: Int32
    let path: String
    let io: any FileIO

    init(_ path: String, io: any FileIO) throws(ProtectionError) {
        self.path = path
        self.io = io
        do throws(SystemError) { fd = try io.open(path, flags: O_WRONLY | O_APPEND, mode: 0) } catch { throw .errno(error.errno, "append to", path) }
    }

    func append(_ i: Int) throws(ProtectionError) {
        do throws(SystemError) {
            try Array("done \(i)\n".utf8).span.bytes.withUnsafeBytes { (b) throws(SystemError) in try io.writeFully(fd, from: b, at: 0) }
        } catch { throw .errno(error.errno, "append to", path) }
    }

    func sync() throws(ProtectionError) {
        do throws(SystemError) { try io.fsync(fd) } catch { throw .errno(error.errno, "sync", path) }
    }

    func close() throws(ProtectionError) {
        defer { io.close(fd) }
        try sync()
    }
}
