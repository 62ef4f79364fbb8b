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
struct DeviceSecretRotation: ~Copyable {
    let secret: DeviceSecret
    private let fd: Int32
    private let location: DomainLocation
    private let id: DomainID
    private let io: any FileIO
    private var finished = false

    /// Where the next device secret of `id` waits during a rotation.
    static func nextPath(_ location: DomainLocation, _ id: DomainID) -> String { location.deviceDirectory + "/\(id).next.secret" }

    /// Step 1: a fresh device secret, durable at the next path and locked.
    static func begin(for id: DomainID, at location: DomainLocation, io: any FileIO) throws(ProtectionError) -> DeviceSecretRotation {
        try PrivatePath.makeDirectory(location.deviceDirectory)
        try PrivatePath.checkPrivate(location.deviceDirectory, directory: true)
        let key = try crypto { () throws(CryptoError) in try SecretBytes.random(count: DeviceSecret.size) }
        let fd = try key.withUnsafeBytes { (b) throws(ProtectionError) in
            try DurableFile.writeHoldingLock(b, to: nextPath(location, id), mode: 0o600, io: io)
        }
        return DeviceSecretRotation(secret: DeviceSecret(key: key), fd: fd, location: location, id: id, io: io)
    }

    private init(secret: consuming DeviceSecret, fd: Int32, location: DomainLocation, id: DomainID, io: any FileIO) {
        self.secret = secret
        self.fd = fd
        self.location = location
        self.id = id
        self.io = io
    }

    /// Releases the lock; a rotation abandoned before `finish` (an error on the way) is settled first, as `open` would.
    deinit {
        if !finished { Self.resolve(id, location, io: io) }
        io.close(fd)
    }

    /// Step 3, once the keybag sealed under `secret` is durable: shreds the old secret and makes the new one current.
    consuming func finish() throws(ProtectionError) {
        try Self.promote(id, location, io: io)
        finished = true
    }

    /// Overwrites the current secret in place (the rename alone would leave its bytes in a freed block), then renames the next one over it.
    private static func promote(_ id: DomainID, _ location: DomainLocation, io: any FileIO) throws(ProtectionError) {
        let current = location.deviceSecretPath(id)
        do throws(SystemError) {
            _ = try DurableFile.overwrite(current, io: io)
            try io.rename(nextPath(location, id), to: current)
            try io.syncDirectory(of: current)
        } catch { throw ProtectionError.errno(error.errno, "replace the device secret", current) }
    }

    /// Finishes or discards a rotation whose writer died (run by `open`; best effort, like the temporary-file sweep).
    ///
    /// Only with the next secret's lock (no rotation is running), and decided by the keybag on disk now: if it
    /// authenticates under the next secret, the rotation reached step 2 and is finished; if it authenticates
    /// under the current one, the next secret was never used and is shredded; otherwise nothing is touched.
    static func settle(for id: DomainID, at location: DomainLocation, io: any FileIO) {
        let next = nextPath(location, id)
        DurableFile.sweep(location.deviceDirectory, name: lastComponent(of: next), io: io)
        let fd: Int32
        do throws(SystemError) { fd = try io.open(next, flags: O_WRONLY | O_NOFOLLOW | O_NONBLOCK, mode: 0) } catch { return }
        defer { io.close(fd) }
        do throws(SystemError) { guard try DurableFile.lockOwned(fd, at: next, wait: false) else { return } } catch { return }
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
