#if canImport(Glibc)
import Glibc
#endif
internal import PathSyntax

/// The one atomic replace of a file: a locked temporary file beside it, fsync, rename over it, directory fsync.
///
/// Every file the library replaces as a whole goes through here: the keybag, the device secret and the rotation
/// journal (`DurableFile`), protected files (`ProtectedFiles.write`, `protectInPlace`), their conversion back to
/// plain files (`unprotectInPlace`) and a container's plain metadata files. Readers see the old contents or the new,
/// never a mix; after a crash one of the two is on disk, and at most a temporary file is left, which `sweep` removes.
///
/// The temporary name (FORMAT.md §6.6): `.<name>.dp.tmp` first; when something is at that name that a sweep cannot
/// remove (a live writer's file, or anything planted there), a random `.<name>.dp-<hex>.tmp`.
///
/// Every call is relative to the parent directory, opened once (`*at` calls): the temporary file and the rename
/// land in the same directory whatever happens to the path meanwhile, and a confined seam (a container's, which
/// opens that directory with `openat2(RESOLVE_BENEATH)`) confines all of them by confining that one open.
///
/// Security: the temporary file is created with `O_CREAT | O_EXCL | O_NOFOLLOW`, so whatever is at a name already
/// (a link, a hard link, a FIFO, a directory) is neither followed nor reused, and is left alone. The writer takes
/// an exclusive OFD lock on the new file at once and holds it until after the rename: a sweep removes only a
/// temporary whose lock it can take, so never a live writer's; the kernel drops the lock when the writer dies. The
/// writer unlinks only a temporary it created and still holds.
package final class AtomicReplace {
    /// The seam every call goes through.
    package let io: any FileIO
    /// The file being replaced, as the caller named it.
    package let path: String
    /// The directory that holds it, open (`O_RDONLY | O_DIRECTORY`) for the `*at` calls and its fsync.
    package let directory: Int32
    /// The last component of `path`.
    package let name: String
    /// The temporary file's name in `directory`.
    package let temporaryName: String
    /// The temporary file, open with the flags asked for and holding its exclusive OFD lock; the caller closes it
    /// (after `commit`, or after `discard`), which releases the lock.
    package let fd: Int32
    /// Whether `commit` renamed the temporary file over `path`.
    package private(set) var renamed = false

    /// Opens the directory of `path` and creates, under the name rule, a locked temporary file in it.
    ///
    /// - Parameters:
    ///   - path: the file to replace (or create).
    ///   - mode: the new file's mode.
    ///   - flags: its access mode (`O_WRONLY` or `O_RDWR`).
    /// - Throws: the errno of the directory's open, of the create or of the lock; `EBUSY` when no name could be
    ///   claimed (other writers keep taking them). Nothing is left behind.
    package init(replacing path: String, mode: mode_t, flags: Int32 = O_RDWR, io: any FileIO) throws(SystemError) {
        let name = lastComponent(of: path)
        guard !name.isEmpty, name != ".", name != ".." else { throw SystemError(EISDIR) }
        let directory = try io.open(parentDirectory(of: path), flags: O_RDONLY | O_DIRECTORY, mode: 0)
        do throws(SystemError) {
            (fd, temporaryName) = try Self.claim(name, in: directory, mode: mode, flags: flags, io: io)
        } catch {
            io.close(directory)
            throw error
        }
        (self.io, self.path, self.directory, self.name) = (io, path, directory, name)
    }

    deinit { io.close(directory) }

    /// The temporary file's path (for messages and tests).
    package var temporaryPath: String { Self.join(parentDirectory(of: path), temporaryName) }

    /// Makes the temporary file's contents the file's: fsync, rename over it, directory fsync.
    ///
    /// - Parameters:
    ///   - syncingFile: fsync the temporary file first (false when the caller has synced it its own way).
    ///   - syncingDirectory: fsync the directory after the rename, so the new name survives a power loss.
    ///   - keepingAttributes: copy the old file's `user.*` extended attributes to the new one first.
    /// - Throws: the errno of the failed step; `renamed` says whether the replace happened (a failed directory fsync).
    package func commit(syncingFile: Bool, syncingDirectory: Bool, keepingAttributes: Bool) throws(SystemError) {
        if syncingFile { try io.fsync(fd) }
        if keepingAttributes { try io.copyUserAttributes(at: directory, from: name, to: fd) }
        try io.renameAt(directory, temporaryName, to: name)  // still locked, so no sweep removes it first
        renamed = true
        if syncingDirectory { try io.fsync(directory) }
    }

    /// Removes the temporary file unless it was renamed; call it before closing `fd`, whose lock makes the name ours.
    package func discard() {
        if !renamed { try? io.unlinkAt(directory, temporaryName) }
    }

    // MARK: The name rule

    /// The name a replace of `name` tries first: `.<name>.dp.tmp`.
    package static func temporaryName(for name: String) -> String { ".\(name).dp.tmp" }

    /// A fresh random name for a replace of `name`: `.<name>.dp-<hex>.tmp` (48 random bits).
    package static func randomTemporaryName(for name: String) -> String {
        ".\(name).dp-\(String(UInt64.random(in: 0...0xFFFF_FFFF_FFFF), radix: 16)).tmp"
    }

    /// The name of the file whose temporary `entry` is under the rule, or nil when `entry` is not such a name.
    package static func target(ofTemporary entry: String) -> String? {
        guard entry.hasPrefix("."), entry.hasSuffix(".tmp") else { return nil }
        let body = entry.dropFirst().dropLast(4)
        let target: Substring
        if body.hasSuffix(".dp") {
            target = body.dropLast(3)
        } else if let r = body.ranges(of: ".dp-").last {
            let hex = body[r.upperBound...]
            guard !hex.isEmpty, hex.allSatisfy(\.isHexDigit) else { return nil }
            target = body[..<r.lowerBound]
        } else {
            return nil
        }
        return target.isEmpty ? nil : String(target)
    }

    /// `directory/name`, without doubling a "/" (for the root) or prefixing "." (for a relative name).
    package static func join(_ directory: String, _ name: String) -> String {
        directory == "." ? name : directory == "/" ? "/" + name : directory + "/" + name
    }

    /// Creates and locks a temporary file for `name` in `directory`: the fixed name, reused once a dead writer's
    /// file there is swept, else random names.
    private static func claim(_ name: String, in directory: Int32, mode: mode_t, flags: Int32, io: any FileIO) throws(SystemError) -> (Int32, String) {
        let fixed = temporaryName(for: name)
        var swept = false
        for attempt in 0..<5 {
            let tmp = attempt == 0 || (attempt == 1 && swept) ? fixed : randomTemporaryName(for: name)
            let fd: Int32
            do throws(SystemError) { fd = try io.openAt(directory, tmp, flags: flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY, mode: mode) } catch {
                guard error.errno == EEXIST else { throw error }
                // Not ours: a dead writer's (swept, then the name is reused once), a live writer's or a planted thing (left).
                if attempt == 0 { swept = (try? sweep(tmp, in: directory, owner: .anyone, io: io)) == .removed }
                continue
            }
            // A sweep may have locked and unlinked the new file before this lock (nobody held it yet, so it looked
            // dead). Holding the lock, any such sweep is over (it unlinks before it lets go), so one link left means
            // the name is still ours.
            let claimed: Bool
            do throws(SystemError) {
                let locked = try io.tryLockExclusive(fd)
                claimed = locked ? try io.status(fd).links == 1 : false
            } catch {
                io.close(fd)  // whether the name is still ours is unknown: left for a sweep
                throw error
            }
            if claimed { return (fd, tmp) }
            io.close(fd)  // the sweep removes it: not ours to touch
        }
        throw SystemError(EBUSY)
    }
}

/// What a sweep found at one temporary name.
package enum TemporarySweep: Equatable, Sendable { case absent, removed, inUse }

// The one sweep of abandoned temporaries: recovery (`ProtectedFiles.recoverTree`, `dpctl repair`), a writable open
// (the fixed name), the domain's open (the keybag's and device secret's) and `claim` above all remove them here.
//
// Security: only a regular file with one link is ever removed (`openOwned`): a symbolic link, a hard link to
// someone's file, a FIFO or a directory planted at a temporary name is left alone and reported, never followed or
// unlinked. A file whose lock another holds has a live writer and stays.
extension AtomicReplace {
    /// Removes the temporary `name` in `directory` if its writer died (its lock can be taken).
    ///
    /// - Parameter owner: whose file it may be (a dead writer's file is its writer's; a private directory asks `.us`).
    /// - Throws: `.foreign` for anything but a regular file of ours with one link; `.system` for other failures.
    package static func sweep(_ name: String, in directory: Int32, owner: FileOwner, io: any FileIO) throws(OwnedFileFailure) -> TemporarySweep {
        for _ in 0..<3 {
            let fd: Int32
            do throws(OwnedFileFailure) { fd = try io.openOwned(at: directory, name, flags: O_RDWR, owner: owner) } catch .system(let e) where e.errno == ENOENT {
                return .absent
            }
            defer { io.close(fd) }
            do throws(SystemError) {
                guard try io.tryLockExclusive(fd) else { return .inUse }
                // Between our open and our lock its writer may have renamed it into place and another writer made a
                // new file under the name: that one is not ours to judge.
                let named: Bool
                do throws(SystemError) { named = try io.identityAt(directory, name) == io.identity(fd) } catch where error.errno == ENOENT { named = false }
                guard named else { continue }
                // Holding the lock of the file the name names, nobody else can change the name.
                do { try io.unlinkAt(directory, name) } catch where error.errno == ENOENT {}
            } catch { throw .system(error) }
            return .removed
        }
        return .inUse
    }

    /// `sweep` of the temporary file at `path`: one failed `open` when there is none (a writable open checks the fixed name).
    package static func sweep(_ path: String, owner: FileOwner = .anyone, io: any FileIO) throws(OwnedFileFailure) -> TemporarySweep {
        do throws(OwnedFileFailure) { io.close(try io.openOwned(path, flags: O_RDWR, owner: owner)) } catch .system(let e) where e.errno == ENOENT {
            return .absent
        }
        let directory: Int32
        do throws(SystemError) { directory = try io.open(parentDirectory(of: path), flags: O_RDONLY | O_DIRECTORY, mode: 0) } catch {
            if error.errno == ENOENT { return .absent }
            throw .system(error)
        }
        defer { io.close(directory) }
        return try sweep(lastComponent(of: path), in: directory, owner: owner, io: io)
    }

    /// Sweeps every entry of the directory `path` that `isTemporary` accepts; best effort (what cannot be removed
    /// now, or is not ours, is left for the next sweep).
    /// - Returns: the names removed.
    @discardableResult
    package static func sweep(directory path: String, owner: FileOwner, io: any FileIO, where isTemporary: (String) -> Bool) -> [String] {
        guard let directory = try? io.open(path, flags: O_RDONLY | O_DIRECTORY, mode: 0) else { return [] }
        defer { io.close(directory) }
        return names(in: directory).filter(isTemporary).filter { (try? sweep($0, in: directory, owner: owner, io: io)) == .removed }
    }

    /// The names in the open directory `fd` (read through a duplicate, so `fd` stays as it is).
    private static func names(in fd: Int32) -> [String] {
        let copy = dup(fd)
        guard copy >= 0 else { return [] }
        guard let dir = fdopendir(copy) else { Glibc.close(copy); return [] }
        defer { closedir(dir) }
        var out: [String] = []
        while let e = readdir(dir) { out.append(entryName(e)) }
        return out
    }
}
