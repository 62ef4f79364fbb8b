import DataProtectionFormat
import SystemLayer
import ProtectionCrypto
internal import PathSyntax

#if canImport(Glibc)
import Glibc
#endif

/// Replacing a domain's device secret (on `passwd` and `recover`) so that every older copy of the keybag stops opening.
///
/// A keybag copy, the passphrase it was written under and the device secret open classes A–C; after a
/// passphrase change the old copy would keep doing so with the old passphrase for as long as the device
/// secret stayed the same. So `passwd` draws a new device secret, seals the keybag under it, and shreds the
/// old one (Apple effaces the keybag key the same way). The steps, each durable before the next:
///
/// 1. `begin`: the new secret is written to `<id>.next.secret`, whose exclusive OFD lock is held from
///    before the file has that name until `finish` returns;
/// 2. the caller writes the keybag sealed under it (its device-secret identifier names the new secret);
/// 3. `finish`: the old `<id>.secret` is overwritten in place and the new one renamed over it.
///
/// A crash before step 2's rename leaves the old keybag with the old secret (the old passphrase unlocks);
/// after it, the new keybag names the next secret, which `DeviceSecret.load(for:at:io:)` finds (the new
/// passphrase unlocks). `settle`, at every `open`, finishes or discards a rotation whose writer died.
///
/// Every keybag write holds an exclusive OFD lock on the current `<id>.secret` (`writing(under:…)`, and a
/// rotation from `begin` to `finish`), and checks that the secret it seals under is still current: a rotation
/// never shreds the secret another process is about to seal the keybag under.
package struct DeviceSecretRotation: ~Copyable {
    package let secret: DeviceSecret
    private let fd: Int32
    private let writeLock: Int32
    private let location: DomainLocation
    private let id: DomainID
    private let io: any FileIO
    private var finished = false

    /// Where the next device secret of `id` waits during a rotation.
    package static func nextPath(_ location: DomainLocation, _ id: DomainID) -> String { location.deviceDirectory + "/\(id).next.secret" }

    /// Step 1: takes the keybag write lock, then writes a fresh device secret, durable at the next path and locked.
    /// - Parameter replacing: the identifier of the device secret the caller read the keybag with (`passwd`);
    ///   nil to replace whatever is there (`recover`).
    /// - Throws: `.wrongPassphrase` when another process replaced the device secret since (a concurrent `passwd`).
    package static func begin(for id: DomainID, replacing: [UInt8]?, at location: DomainLocation, io: any FileIO) throws(ProtectionError) -> DeviceSecretRotation {
        try PrivatePath.makeDirectory(location.deviceDirectory)
        try PrivatePath.checkPrivate(location.deviceDirectory, directory: true)
        let writeLock = try lockCurrent(id, location, io: io)
        do throws(ProtectionError) {
            if let replacing { try checkCurrent(is: replacing, id, location, io: io) }
            let key = try crypto { () throws(CryptoError) in try SecretBytes.random(count: DeviceSecret.size) }
            let fd = try key.withUnsafeBytes { (b) throws(ProtectionError) in
                try DurableFile.writeHoldingLock(b, to: nextPath(location, id), mode: 0o600, io: io)
            }
            return DeviceSecretRotation(secret: DeviceSecret(key: key), fd: fd, writeLock: writeLock, location: location, id: id, io: io)
        } catch {
            if writeLock >= 0 { io.close(writeLock) }
            throw error
        }
    }

    private init(secret: consuming DeviceSecret, fd: Int32, writeLock: Int32, location: DomainLocation, id: DomainID, io: any FileIO) {
        self.secret = secret
        self.fd = fd
        self.writeLock = writeLock
        self.location = location
        self.id = id
        self.io = io
    }

    /// Releases the locks; a rotation abandoned before `finish` (an error on the way) is settled first, as `open` would.
    deinit {
        if !finished { Self.resolve(id, location, io: io) }
        io.close(fd)
        if writeLock >= 0 { io.close(writeLock) }
    }

    /// Runs `body`, a keybag write sealed under `device`, holding the keybag write lock, once `device` is checked to be still current.
    /// - Throws: `.wrongPassphrase` when a passphrase change replaced the device secret since `device` was read; `body`'s errors.
    package static func writing<R>(
        under device: borrowing DeviceSecret, for id: DomainID, at location: DomainLocation, io: any FileIO, _ body: () throws(ProtectionError) -> R
    ) throws(ProtectionError) -> R {
        let lock = try lockCurrent(id, location, io: io)
        defer { if lock >= 0 { io.close(lock) } }
        try checkCurrent(is: try device.identifier(), id, location, io: io)
        return try body()
    }

    /// Takes the exclusive OFD lock of the current device secret (waiting for another writer), or -1 when there is none (a new machine).
    private static func lockCurrent(_ id: DomainID, _ location: DomainLocation, io: any FileIO) throws(ProtectionError) -> Int32 {
        let path = location.deviceSecretPath(id)
        for _ in 0..<8 {
            let fd: Int32
            do throws(SystemError) { fd = try io.open(path, flags: O_RDWR | O_NOFOLLOW, mode: 0) } catch {
                if error.errno == ENOENT { return -1 }
                throw .errno(error.errno, "lock", path)
            }
            do throws(SystemError) {
                if try DurableFile.lockOwned(fd, at: path, wait: true, io: io) { return fd }
            } catch {
                io.close(fd)
                throw .errno(error.errno, "lock", path)
            }
            io.close(fd)  // replaced while we waited: lock the new one
        }
        throw ProtectionError.errno(EAGAIN, "lock", path)
    }

    private static func checkCurrent(is identifier: [UInt8], _ id: DomainID, _ location: DomainLocation, io: any FileIO) throws(ProtectionError) {
        guard try DeviceSecret.load(for: id, at: location, io: io).identifier() == identifier else {
            throw ProtectionError(.wrongPassphrase, "the passphrase of the domain at '\(location.home)' was changed by another process meanwhile (its device secret was replaced); run the command again with the current passphrase", path: location.deviceSecretPath(id))
        }
    }

    /// Step 3, once the keybag sealed under `secret` is durable: shreds the old secret and makes the new one current.
    package consuming func finish() throws(ProtectionError) {
        try Self.promote(id, location, io: io)
        finished = true
    }

    /// Overwrites the current secret in place (the rename alone would leave its bytes in a freed block), then renames the next one over it.
    private static func promote(_ id: DomainID, _ location: DomainLocation, io: any FileIO) throws(ProtectionError) {
        let current = location.deviceSecretPath(id)
        _ = try DurableFile.overwrite(current, io: io, action: "replace the device secret")
        do throws(SystemError) {
            try io.rename(nextPath(location, id), to: current)
            try io.syncDirectory(of: current)
        } catch { throw ProtectionError.errno(error.errno, "replace the device secret", current) }
    }

    /// Finishes or discards a rotation whose writer died (run by `open`; best effort, like the temporary-file sweep).
    ///
    /// Only with the next secret's lock (no rotation is running), and decided by the keybag on disk now: if it
    /// authenticates under the next secret, the rotation reached step 2 and is finished; if it authenticates
    /// under the current one, the next secret was never used and is shredded; otherwise nothing is touched.
    package static func settle(for id: DomainID, at location: DomainLocation, io: any FileIO) {
        let next = nextPath(location, id)
        DurableFile.sweep(location.deviceDirectory, name: lastComponent(of: next), io: io)
        let fd: Int32
        do throws(SystemError) { fd = try io.open(next, flags: O_WRONLY | O_NOFOLLOW | O_NONBLOCK, mode: 0) } catch { return }
        defer { io.close(fd) }
        do throws(SystemError) { guard try DurableFile.lockOwned(fd, at: next, wait: false, io: io) else { return } } catch { return }
        // A keybag writer may be sealing under the current secret: promote only with the write lock.
        let writeLock: Int32
        do throws(ProtectionError) { writeLock = try lockCurrent(id, location, io: io) } catch { return }
        defer { if writeLock >= 0 { io.close(writeLock) } }
        resolve(id, location, io: io)
    }

    /// Finishes or discards the rotation at the next path, whose lock the caller holds, by the keybag on disk now.
    private static func resolve(_ id: DomainID, _ location: DomainLocation, io: any FileIO) {
        let next = nextPath(location, id)
        do throws(ProtectionError) {
            let (_, body, mac) = try Keybag.parseFile(location, io: io)
            func seals(_ path: String) -> Bool {
                do throws(ProtectionError) { return try Keybag.isAuthentic(body, mac, try DeviceSecret.load(location, id, path: path, io: io)) } catch { return false }
            }
            if seals(next) {
                try promote(id, location, io: io)
            } else if seals(location.deviceSecretPath(id)) {
                try DurableFile.shred(next, io: io)
            }
        } catch {}
    }
}
