internal import CSQLite
import DataProtection
import Locking
import SystemLayer

#if canImport(Glibc)
import Glibc
#endif

/// A SQLite VFS whose database files are protected files of one `ProtectedFiles` (its domain's keys and lock).
///
/// Registered under its own name, never as the process default: a connection uses it by naming it
/// (`sqlite3_open_v2(…, "dataprotection")`, or the URI `file:app.db?vfs=dataprotection&protection=complete`).
///
/// What each file SQLite opens becomes:
/// - the main database, its rollback journal, its WAL and a super-journal: protected files with 4 KiB chunks (4 KiB
///   pages, so a page write is one chunk write). A new main database takes the class of the URI parameter `protection`
///   (`complete`, `completeUnlessOpen`, `completeUntilFirstUserAuthentication`, `none`, or A–D; default
///   `completeUntilFirstUserAuthentication`, the default of new files on Apple platforms); its other files take the
///   class in the main database's header;
/// - SQLite's temporary files (sorts, temporary tables, statement journals): memory, never the disk;
/// - the wal-index (`-shm`): a plain shared-memory file (`WALIndex`).
///
/// Method by method: `xRead`/`xWrite`/`xTruncate`/`xSync`/`xFileSize` are the handle's `read`/`write`/`truncate`/
/// `sync`/`size`; `xLock`/`xUnlock`/`xCheckReservedLock` are OFD locks on the handle's descriptor
/// (`DatabaseLocks.swift`); `xShm*` map and lock the wal-index; `xDelete`/`xAccess` go through the file layer's seam;
/// `xFullPathname`, randomness, time and sleep are the unix VFS's.
public final class ProtectedVFS: @unchecked Sendable {  // immutable after init; SQLite calls it from any thread
    /// The name SQLite knows it by.
    public let name: String
    /// The files it opens (4 KiB chunks), whose keys and lock govern every connection through it.
    public let files: ProtectedFiles
    let io: any FileIO
    let vfs: UnsafeMutablePointer<sqlite3_vfs>
    private let unix: UnsafeMutablePointer<sqlite3_vfs>
    private let cName: UnsafeMutablePointer<CChar>

    /// Page and chunk size of protected databases.
    public static let pageSize = 4096

    /// The default name (`vfs=dataprotection`).
    public static let defaultName = "dataprotection"

    private static let registry = Locked<[String: ProtectedVFS]>([:])
    private static let byFiles = Locked<[ObjectIdentifier: ProtectedVFS]>([:])

    /// Registers a VFS over `files` under `name` (not as the default VFS); registering the same files under the same
    /// name again returns the first registration. A VFS stays registered for the life of the process: connections may
    /// outlive any one caller.
    ///
    /// The first registration in a process also installs the page wipe (`PageWipe`: lock frees and zeroes the cached
    /// pages of a locked class), which SQLite accepts only before it initializes: register before the process's first
    /// other SQLite call. If SQLite was initialized first, registration still succeeds, `pageWipeInstalled` is false,
    /// and opening a `complete` database through the VFS fails (its lock could not wipe its pages).
    ///
    /// - Throws: `DatabaseError` (`SQLITE_MISUSE`) when `name` is taken by other files, or SQLite has no unix VFS.
    public static func register(files: ProtectedFiles, name: String = ProtectedVFS.defaultName) throws(DatabaseError) -> ProtectedVFS {
        PageWipe.install()  // before sqlite3_vfs_find, which initializes SQLite
        let result: Result<ProtectedVFS, DatabaseError> = registry.withLock { r in
            if let v = r[name] {
                return v.files === files ? .success(v) : .failure(DatabaseError(SQLITE_MISUSE, "unable to register the VFS '\(name)': the name is taken by another domain's files; choose another name"))
            }
            guard let unix = sqlite3_vfs_find("unix") else { return .failure(DatabaseError(SQLITE_MISUSE, "unable to register the VFS '\(name)': this SQLite has no unix VFS")) }
            let v = ProtectedVFS(name: name, files: files, unix: unix)
            let rc = sqlite3_vfs_register(v.vfs, 0)
            guard rc == SQLITE_OK else { return .failure(DatabaseError(rc, "unable to register the VFS '\(name)': \(String(cString: sqlite3_errstr(rc)))")) }
            r[name] = v
            return .success(v)
        }
        return try result.get()
    }

    /// The VFS of `files`, registered under a name of its own on first use (how `ProtectedDatabase.open` and the GRDB
    /// integration find it).
    ///
    /// - Throws: `DatabaseError` (`SQLITE_MISUSE`) when SQLite has no unix VFS to build on.
    public static func of(_ files: ProtectedFiles) throws(DatabaseError) -> ProtectedVFS {
        let id = ObjectIdentifier(files)
        if let v = byFiles.withLock({ $0[id] }) { return v }
        let v = try register(files: files, name: "\(defaultName)-\(UInt(bitPattern: id.hashValue))")
        byFiles.withLock { $0[id] = v }
        return v
    }

    /// Whether lock wipes the pages SQLite caches for this process's protected databases (`PageWipe`): false when
    /// SQLite was initialized before the first VFS registration, and then `complete` databases refuse to open.
    public static var pageWipeInstalled: Bool { PageWipe.installed }

    private init(name: String, files: ProtectedFiles, unix: UnsafeMutablePointer<sqlite3_vfs>) {
        self.name = name
        self.files = files.withChunkSize(Self.pageSize)
        self.io = files.fileIO
        self.unix = unix
        cName = strdup(name)
        vfs = .allocate(capacity: 1)
        vfs.initialize(to: sqlite3_vfs())
        vfs.pointee.iVersion = 2
        vfs.pointee.szOsFile = Int32(MemoryLayout<dp_sqlite3_file>.size)
        vfs.pointee.mxPathname = unix.pointee.mxPathname
        vfs.pointee.zName = UnsafePointer(cName)
        vfs.pointee.pAppData = Unmanaged.passUnretained(self).toOpaque()  // the registry keeps it alive
        vfs.pointee.xOpen = vfsOpen
        vfs.pointee.xDelete = vfsDelete
        vfs.pointee.xAccess = vfsAccess
        vfs.pointee.xFullPathname = { v, name, n, out in unixOf(v).pointee.xFullPathname(unixOf(v), name, n, out) }
        vfs.pointee.xDlOpen = { v, name in unixOf(v).pointee.xDlOpen(unixOf(v), name) }
        vfs.pointee.xDlError = { v, n, out in unixOf(v).pointee.xDlError(unixOf(v), n, out) }
        vfs.pointee.xDlSym = { v, h, sym in unixOf(v).pointee.xDlSym(unixOf(v), h, sym) }
        vfs.pointee.xDlClose = { v, h in unixOf(v).pointee.xDlClose(unixOf(v), h) }
        vfs.pointee.xRandomness = { v, n, out in unixOf(v).pointee.xRandomness(unixOf(v), n, out) }
        vfs.pointee.xSleep = { v, us in unixOf(v).pointee.xSleep(unixOf(v), us) }
        vfs.pointee.xCurrentTime = { v, out in unixOf(v).pointee.xCurrentTime(unixOf(v), out) }
        vfs.pointee.xGetLastError = { v, n, out in unixOf(v).pointee.xGetLastError(unixOf(v), n, out) }
        vfs.pointee.xCurrentTimeInt64 = { v, out in unixOf(v).pointee.xCurrentTimeInt64(unixOf(v), out) }
    }

    static func from(_ v: UnsafeMutablePointer<sqlite3_vfs>?) -> ProtectedVFS {
        Unmanaged<ProtectedVFS>.fromOpaque(v!.pointee.pAppData).takeUnretainedValue()
    }

    // MARK: Opening

    /// The file SQLite asks for: a protected file for anything that holds content under a name, memory for the rest.
    ///
    /// - Parameters:
    ///   - name: the full path SQLite made (`xFullPathname`), nil for a temporary file.
    ///   - flags: `SQLITE_OPEN_*`: the file's kind, read-write or read-only, create, exclusive, delete-on-close.
    func open(_ name: UnsafePointer<CChar>?, flags: Int32) throws(ProtectionError) -> DatabaseFile {
        do throws(ProtectionError) { return try openFile(name, flags: flags) } catch where error.code == .notProtected || error.code == .authenticationFailed {
            let kind = flags & 0x000F_FF00
            guard let name, [SQLITE_OPEN_MAIN_JOURNAL, SQLITE_OPEN_WAL, SQLITE_OPEN_SUPER_JOURNAL].contains(kind) else { throw error }
            throw damagedCompanion(error, String(cString: name), kind: kind)
        }
    }

    /// The error for a journal or WAL that does not open as a protected file: which file of which database, what a power
    /// loss does to it, and the fix. (The file layer's own advice, `dpctl protect` or restoring the file alone, is wrong
    /// for a database's companion.)
    private func damagedCompanion(_ error: ProtectionError, _ path: String, kind: Int32) -> ProtectionError {
        let what = kind == SQLITE_OPEN_WAL ? "WAL" : kind == SQLITE_OPEN_SUPER_JOURNAL ? "super-journal" : "rollback journal"
        let database = kind == SQLITE_OPEN_WAL || kind == SQLITE_OPEN_MAIN_JOURNAL ? path.replacing(/-(journal|wal)$/, with: "") : path
        let why = error.code == .notProtected ? "it does not start as a protected file" : "part of it fails authentication"
        return ProtectionError(
            error.code,
            "unable to open '\(path)', the \(what) of the database '\(database)': \(why). A power loss while SQLite was writing it can leave it so, as can tampering, and SQLite needs it to finish the database's last transaction: restore the database with its companion files from a backup (SECURITY.md, \"Protected databases\")",
            path: path, underlying: error)
    }

    private func openFile(_ name: UnsafePointer<CChar>?, flags: Int32) throws(ProtectionError) -> DatabaseFile {
        let kind = flags & 0x000F_FF00
        let persistent = [SQLITE_OPEN_MAIN_DB, SQLITE_OPEN_MAIN_JOURNAL, SQLITE_OPEN_WAL, SQLITE_OPEN_SUPER_JOURNAL].contains(kind)
        guard let name, persistent else { return MemoryDatabaseFile() }
        let path = String(cString: name)
        let writable = flags & SQLITE_OPEN_READWRITE != 0
        let via: ProtectedDataEntryPoint = writable ? .databaseOpen : .databaseOpenReadOnly
        let exclusive = flags & SQLITE_OPEN_EXCLUSIVE != 0
        var handle: ProtectedFileHandle?
        var created = false
        if flags & SQLITE_OPEN_CREATE != 0, exclusive || !io.exists(path) {
            created = true
            handle = try files.createOrAdopt(path, protection: try protection(of: kind, name, path), exclusive: exclusive, via: via)
        } else {
            do throws(ProtectionError) {
                handle = try openSealed(path, forWriting: writable, on: via)
            } catch where error.code == .notProtected && !writable && kind != SQLITE_OPEN_MAIN_DB && isEmptyFile(path) {
                // A journal or WAL that a crash left empty, opened to see whether it is hot: it is not (nothing in it).
                return MemoryDatabaseFile()
            } catch where error.code == .notProtected && writable {
                // Empty: a crash between a create and its header write left it, or another connection is creating it.
                handle = try files.createOrAdopt(path, protection: try protection(of: kind, name, path), exclusive: false, via: via)
            }
        }
        let opened: ProtectedFileHandle
        if let handle { opened = handle } else { opened = try openSealed(path, forWriting: writable, on: via) }  // nil: another connection made it a protected file first
        if kind == SQLITE_OPEN_MAIN_DB || kind == SQLITE_OPEN_WAL {
            AccessTime.skipUpdates(opened.lockDescriptor)  // read and written in turns: no inode update at each first read
        }
        opened.writeOnlyUnderCallersExclusiveLock()  // every write: the seal lock, or SQLite's (`writeSealed`)
        let file = ProtectedDatabaseFile(handle: opened, io: io, deleteOnClose: flags & SQLITE_OPEN_DELETEONCLOSE != 0)
        file.syncsDirectoryAtFirstSync = flags & SQLITE_OPEN_CREATE != 0 && kind != SQLITE_OPEN_MAIN_DB
        file.holdsSmallWrites = kind != SQLITE_OPEN_MAIN_DB  // HeldWrites.swift
        // A WAL's commits are marks in a log, without fsyncs, until SQLite syncs the WAL (a checkpoint, or every commit
        // at FULL), which empties the log whichever connection's handle syncs (FORMAT.md §6.7.6).
        if kind == SQLITE_OPEN_WAL {
            opened.logCommits()
            registerHeldFrames(of: file)
        }
        if kind == SQLITE_OPEN_MAIN_DB {
            // SQLite journals (rollback) or logs (WAL) every page before it overwrites it here, and its recovery
            // rewrites the page whole: the chunk journal keeps only what SQLite does not cover (FORMAT.md §6.7.5).
            opened.leaveWholeChunksToTheCallersJournal()
            opened.keepFirstChunkBetweenReads()
            do throws(ProtectionError) {
                try file.holdConnectionLock()
                try expectPageCache(of: file)
            } catch {
                _ = file.close()
                if created { try? io.unlink(path) }  // refused: leave nothing behind
                throw error
            }
        }
        connect(file, kind: kind, name: name)
        return file
    }

    /// Opens the protected file at `path`; an open that meets a chunk another connection is re-sealing (the open
    /// authenticates the last chunk, at the size it reads) is made again holding the seal lock shared through a
    /// descriptor of its own (`sealed`), where no writer is half-way: a chunk that still fails is tampered with.
    private func openSealed(_ path: String, forWriting writable: Bool, on via: ProtectedDataEntryPoint) throws(ProtectionError) -> ProtectedFileHandle {
        do throws(ProtectionError) { return try files.open(path, forWriting: writable, on: via) } catch where error.code == .authenticationFailed {
            let fd: Int32
            do throws(OwnedFileFailure) { fd = try io.openOwned(path, flags: O_RDONLY) } catch { throw error.error("open", path, at: path) }
            defer { io.close(fd) }
            guard OFDLock.waitSet(fd: fd, .shared, start: ProtectedDatabaseFile.sealByte, length: 1) == .done else {
                throw ProtectionError(.io(EIO), "unable to lock '\(path)' against other connections' writes", path: path)
            }
            return try files.open(path, forWriting: writable, on: via)
        }
    }

    /// Ties the page cache SQLite makes next for the main database `file` to this VFS and its class, and registers the
    /// holder through which a lock wipes it (`PageWipe`; unregistered by the file's `close`).
    ///
    /// - Throws: `ProtectionError` (`unsupportedFeature`) for a `complete` database when the wipe is not installed:
    ///   its lock could not take its pages out of memory, and that promise is not weakened silently.
    private func expectPageCache(of file: ProtectedDatabaseFile) throws(ProtectionError) {
        let c = file.handle.protectionClass, path = file.handle.path
        guard PageWipe.installed || c != .complete else {
            throw ProtectionError(.unsupportedFeature, "unable to open '\(path)': SQLite was initialized before the protected VFS was registered, so a lock could not wipe this class complete database's cached pages; register the VFS (ProtectedVFS.register, ProtectedVFS.of or ProtectedDatabase.open) before the process's first other SQLite call", path: path)
        }
        let owner = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        PageWipe.expect(owner: owner, protection: c)
        let revocation = files.keys.revocation
        let holder = PageCacheHolder(owner: owner)  // the registry does not retain it: the release closure does
        let slot = revocation.register(holder)
        file.pageCacheRelease = {
            PageWipe.forgetExpectation(owner: owner)
            revocation.unregister(slot: slot)
            withExtendedLifetime(holder) {}
        }
    }

    /// Registers the holder through which a lock zeroes the frames a WAL holds for its commit frame (`HeldBytes`;
    /// unregistered by the file's `close`).
    private func registerHeldFrames(of file: ProtectedDatabaseFile) {
        let revocation = files.keys.revocation
        let holder = file.held  // the registry does not retain it: the file does
        let slot = revocation.register(holder)
        file.heldRelease = { revocation.unregister(slot: slot) }
    }

    /// The main-database files open now, by the address of the name SQLite gave them: each connection's pager has its
    /// own, and its WAL's name lives in the same allocation (`sqlite3_filename_database` returns that address).
    private let mainFiles = Locked<[UnsafeRawPointer: Weak]>([:])

    private final class Weak {
        weak var file: ProtectedDatabaseFile?
        init(_ f: ProtectedDatabaseFile) { file = f }
    }

    /// Links a WAL to its connection's main-database file, which commits the WAL's chunk journal when it gives up the
    /// WAL write lock (`WALIndex.swift`); registers a main-database file for that.
    private func connect(_ file: ProtectedDatabaseFile, kind: Int32, name: UnsafePointer<CChar>) {
        if kind == SQLITE_OPEN_MAIN_DB {
            let key = UnsafeRawPointer(name)
            file.isMainDatabase = true
            mainFiles.withLock { $0[key] = Weak(file) }
            file.forget = { [weak self] in _ = self?.mainFiles.withLock { $0.removeValue(forKey: key) } }
        } else if kind == SQLITE_OPEN_WAL {
            file.isWAL = true
            let key = UnsafeRawPointer(sqlite3_filename_database(name)!)
            mainFiles.withLock { $0[key]?.file }?.wal = file
        }
    }

    /// Whether `path` is a regular file of zero bytes (not following a symbolic link).
    private func isEmptyFile(_ path: String) -> Bool {
        guard let st = try? io.linkStatus(path) else { return false }
        return st.st_mode & S_IFMT == S_IFREG && st.st_size == 0
    }

    /// The class of a new file: the URI's `protection` for a main database, else that of the main database's header.
    private func protection(of kind: Int32, _ name: UnsafePointer<CChar>, _ path: String) throws(ProtectionError) -> ProtectionClass {
        if kind == SQLITE_OPEN_MAIN_DB {
            guard let p = sqlite3_uri_parameter(name, "protection") else { return .completeUntilFirstUserAuthentication }
            let text = String(cString: p)
            guard let c = ProtectionClass(name: text) else {
                throw ProtectionError(.invalidArgument, "unable to create '\(path)': unknown protection class '\(text)'; use complete, completeUnlessOpen, completeUntilFirstUserAuthentication or none", path: path)
            }
            return c
        }
        // A journal or WAL: SQLite names its database (sqlite3_filename_database), which this connection has open; it
        // takes that file's class, not the class of whatever is at the database's path now. A super-journal is
        // "<database>-mjXXXXXXXXX" beside the database that started the transaction.
        if kind != SQLITE_OPEN_SUPER_JOURNAL,
           let main = mainFiles.withLock({ $0[UnsafeRawPointer(sqlite3_filename_database(name)!)]?.file }) {
            return main.handle.protectionClass
        }
        let database: String
        if kind == SQLITE_OPEN_SUPER_JOURNAL, let r = path.range(of: "-mj", options: .backwards) {
            database = String(path[..<r.lowerBound])
        } else {
            database = String(cString: sqlite3_filename_database(name))
        }
        do throws(ProtectionError) { return try files.info(database).protectionClass } catch {
            throw ProtectionError(error.code, "unable to create '\(path)': its database's class is unknown (\(error.message))", path: path, underlying: error)
        }
    }
}

// MARK: - The C entry points (no captures: each finds its VFS or file through SQLite's pointers)

private func unixOf(_ v: UnsafeMutablePointer<sqlite3_vfs>?) -> UnsafeMutablePointer<sqlite3_vfs> { ProtectedVFS.from(v).unixVFS }

extension ProtectedVFS {
    fileprivate var unixVFS: UnsafeMutablePointer<sqlite3_vfs> { unix }
}

private func vfsOpen(
    _ v: UnsafeMutablePointer<sqlite3_vfs>?, _ name: sqlite3_filename?, _ file: UnsafeMutablePointer<sqlite3_file>?, _ flags: Int32,
    _ outFlags: UnsafeMutablePointer<Int32>?
) -> Int32 {
    let f = UnsafeMutableRawPointer(file!).assumingMemoryBound(to: dp_sqlite3_file.self)
    f.pointee.base.pMethods = nil
    f.pointee.object = nil
    do throws(ProtectionError) {
        let object = try ProtectedVFS.from(v).open(name, flags: flags)
        f.pointee.object = Unmanaged.passRetained(object).toOpaque()
        f.pointee.base.pMethods = UnsafePointer(ioMethods)
        outFlags?.pointee = flags
        return SQLITE_OK
    } catch {
        return VFSFailure.record(error, io: error.code == .coordinationFailed ? SQLITE_BUSY : SQLITE_CANTOPEN)
    }
}

private func vfsDelete(_ v: UnsafeMutablePointer<sqlite3_vfs>?, _ name: UnsafePointer<CChar>?, _ syncDirectory: Int32) -> Int32 {
    let me = ProtectedVFS.from(v), path = String(cString: name!)
    do throws(SystemError) {
        try me.io.unlink(path)
        if syncDirectory != 0 { try me.io.syncDirectory(of: path) }
    } catch {
        return error.errno == ENOENT ? DP_IOERR_DELETE_NOENT : DP_IOERR_DELETE
    }
    return SQLITE_OK
}

private func vfsAccess(_ v: UnsafeMutablePointer<sqlite3_vfs>?, _ name: UnsafePointer<CChar>?, _ flags: Int32, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    let me = ProtectedVFS.from(v), path = String(cString: name!)
    out!.pointee = (flags == SQLITE_ACCESS_READWRITE ? me.io.isWritable(path) : me.io.exists(path)) ? 1 : 0
    return SQLITE_OK
}

private func object(_ f: UnsafeMutablePointer<sqlite3_file>?) -> DatabaseFile {
    let p = UnsafeMutableRawPointer(f!).assumingMemoryBound(to: dp_sqlite3_file.self).pointee.object!
    return Unmanaged<DatabaseFile>.fromOpaque(p).takeUnretainedValue()
}

/// The methods of every file the VFS opens (`sqlite3_io_methods` version 2: with the wal-index, without memory mapping).
nonisolated(unsafe) private let ioMethods: UnsafeMutablePointer<sqlite3_io_methods> = {  // written once, then only read
    let m = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
    m.initialize(to: sqlite3_io_methods())
    m.pointee.iVersion = 2
    m.pointee.xClose = { f in
        let p = UnsafeMutableRawPointer(f!).assumingMemoryBound(to: dp_sqlite3_file.self)
        guard let o = p.pointee.object else { return SQLITE_OK }
        p.pointee.object = nil
        let file = Unmanaged<DatabaseFile>.fromOpaque(o)
        defer { file.release() }
        return file.takeUnretainedValue().close()
    }
    m.pointee.xRead = { f, buf, n, offset in object(f).read(UnsafeMutableRawBufferPointer(start: buf, count: Int(n)), at: offset) }
    m.pointee.xWrite = { f, buf, n, offset in object(f).write(UnsafeRawBufferPointer(start: buf, count: Int(n)), at: offset) }
    m.pointee.xTruncate = { f, size in object(f).truncate(to: size) }
    m.pointee.xSync = { f, _ in object(f).sync() }
    m.pointee.xFileSize = { f, out in object(f).size(&out!.pointee) }
    m.pointee.xLock = { f, level in object(f).lock(level) }
    m.pointee.xUnlock = { f, level in object(f).unlock(level) }
    m.pointee.xCheckReservedLock = { f, out in object(f).checkReservedLock(&out!.pointee) }
    m.pointee.xFileControl = { f, op, arg in object(f).fileControl(op, arg) }
    m.pointee.xSectorSize = { _ in Int32(ProtectedVFS.pageSize) }
    // Powersafe overwrite, as the unix VFS says by default: a write changes no byte outside its range even after a power
    // loss. True here because a write that re-seals a chunk holding other committed bytes (a WAL frame's neighbours)
    // journals that chunk first, and recovery restores it whole. SQLite then does not pad a synced WAL commit to a
    // sector boundary with copies of its last frame (each of which would re-seal that chunk once more).
    m.pointee.xDeviceCharacteristics = { _ in SQLITE_IOCAP_POWERSAFE_OVERWRITE }
    m.pointee.xShmMap = { f, region, size, extend, out in
        var p: UnsafeMutableRawPointer?
        let rc = object(f).shmMap(Int(region), size: Int(size), extend: extend != 0, &p)
        out!.pointee = UnsafeMutableRawPointer(mutating: p)
        return rc
    }
    m.pointee.xShmLock = { f, offset, n, flags in object(f).shmLock(offset: Int(offset), count: Int(n), flags: flags) }
    m.pointee.xShmBarrier = { _ in walIndexBarrier() }
    m.pointee.xShmUnmap = { f, delete in object(f).shmUnmap(delete: delete != 0) }
    return m
}()
