// The main path, in the order data takes it: open a domain, unlock it, create or open a protected file, read and
// write it, lock. Read this file first. Each step below is the public front door; the mechanism it calls is in the
// file named at its MARK. The DocC catalog beside it (DataProtection.docc: the tour, the class table, the threat
// model in brief) is built by `scripts/docs`.
//
// The words, once:
// - A *protection domain* is what one passphrase unlocks (the analogue of one device user): a keybag of class keys
//   wrapped under the passphrase and a device secret kept outside the domain's home, and while unlocked those class
//   keys in the kernel keyring.
// - A *protection class* (`complete`, `completeUnlessOpen`, `completeUntilFirstUserAuthentication`, `none`) says when
//   a file's data is reachable: each class has its own key, and `lock` takes A and B away (ProtectionClass.swift).
// - A *protected file* has its own random per-file key, wrapped by its class key in the file's header; its contents
//   are authenticated chunks (FORMAT.md). Changing the passphrase or the class rewraps keys, never the contents.
// - A *container* is an app's sandbox directory (Documents, Library, tmp, a sealed bundle) whose files are protected
//   files with a default class per directory, confined beneath its root (DataProtectionContainers/Container.swift).
//
// The one path data takes (write; a read is the same backwards, and fails `.locked` or `.authenticationFailed`
// before it returns a byte; "Files" is the module DataProtectionFiles, "Keys/Live" the folder Live/ of DataProtectionKeys):
//
//   plaintext ─▶ ProtectedFileHandle (Files)        chunks of 4 KiB, sealed on both cores with fresh nonces
//             ─▶ ChunkSealer (Files/Pipeline)       under keys derived from the per-file key
//   per-file key ─▶ ClassKeys.admit (Keys/Keys)      wrapped by the class key inside one admission, which checks the
//                                                    lock and registers the handle, so `lock` can find and wipe it
//   class key ◀─ KeyStore (Keys/Domain)              the kernel keyring while unlocked; the keybag on disk, wrapped
//   lock      ─▶ LiveLock (Keys/Live)                every process wipes its `complete` handles before lock returns

@_spi(Testing) import DataProtectionKeys  // Keybag and DeviceSecret: testing SPI only so the keybag fuzzer can reach them
import Logging
import CoreMetrics
import DataProtectionTelemetry
import SystemLayer
import ProtectionCrypto
internal import PathSyntax

// MARK: - 1. Open a domain (keybag and device secret: Keys/Domain/Keybag.swift, Keys/Domain/DeviceSecret.swift)

extension ProtectionDomain {
    /// Opens the domain at `location`: reads and authenticates its keybag, and unlocks nothing.
    ///
    /// Removes the temporary files a crash left from an interrupted keybag, journal or device-secret write.
    /// - Parameters:
    ///   - location: the domain's home and device-secret directory, e.g. `DomainLocation.resolve(environment:)`.
    ///   - keyStore: where class keys live while unlocked: the kernel keyring (the default) or, chosen explicitly,
    ///     this process's memory.
    ///   - fileOptions: cipher and chunk size for new files.
    ///   - logger: where the domain logs unlock and lock (never key bytes); nil for none.
    ///   - metrics: where the domain's counters and timers go; nil for the process's bootstrapped swift-metrics backend.
    /// - Throws: `.notFound`, `.corruptKeybag`, `.insecurePermissions`, `.keyringUnavailable`, `.io`.
    public static func open(
        at location: DomainLocation, keyStore: KeyStore = .kernel(.user), fileOptions: ProtectedFileOptions = .init(), logger: Logger? = nil,
        metrics: (any MetricsFactory)? = nil
    ) throws(ProtectionError) -> ProtectionDomain {
        try open(at: location, keyStore: keyStore, fileOptions: fileOptions, io: SystemFileIO(), logger: logger, metrics: metrics)
    }

    /// Test hook: `open(at:keyStore:fileOptions:logger:metrics:)` through the file-system seam `io` (testing SPI, for tests and
    /// the crash worker that inject faults or kill the process at an I/O call).
    @_spi(Testing) public static func open(
        at location: DomainLocation, keyStore: KeyStore = .kernel(.user), fileOptions: ProtectedFileOptions = .init(),
        io: any FileIO, logger: Logger? = nil, metrics: (any MetricsFactory)? = nil
    ) throws(ProtectionError) -> ProtectionDomain {
        try checkStore(keyStore, logger)
        let bag = try Keybag.load(location, io: io) { (c) throws(ProtectionError) in try DeviceSecret.load(for: c, at: location, io: io) }
        // Temporaries of a keybag, journal or device-secret write that a crash interrupted, and a device-secret rotation.
        DurableFile.sweep(location.home, name: lastComponent(of: location.keybagPath), io: io)
        DurableFile.sweep(location.home, name: lastComponent(of: location.journalPath), io: io)
        DurableFile.sweep(location.deviceDirectory, name: lastComponent(of: location.deviceSecretPath(bag.domainID)), io: io)
        DeviceSecretRotation.settle(for: bag.domainID, at: location, io: io)
        return try ProtectionDomain(location: location, bag: bag, keyStore: keyStore, fileOptions: fileOptions, io: io, logger: logger, metrics: metrics)
    }

    // MARK: - 2. Unlock (the key store: Keys/Domain/ClassKeyStore.swift; every process told: Keys/Live/LiveLock.swift)

    /// Unlocks classes A, B and C: derives the KEK from the passphrase and the device secret and puts the class keys in the key store.
    ///
    /// The KEK needs both the passphrase and the device secret, so a copy of the domain's home alone gives no way to
    /// test passphrases offline (SECURITY.md).
    /// - Parameters:
    ///   - passphrase: the passphrase (locked memory).
    ///   - timeout: seconds after which A and B lock by themselves (the kernel's key expiry); nil for never.
    ///   - grace: how long before that auto-lock every process gets `willLock`; `.zero` for no warning.
    /// - Throws: `.wrongPassphrase` (nothing is changed), `.corruptKeybag`, `.keyringUnavailable`.
    public func unlock(passphrase: borrowing SecretBytes, timeout: UInt32? = nil, grace: Duration = LiveLock.defaultGrace) throws(ProtectionError) {
        let t0 = Telemetry.now()
        let bag = try cache.bag()
        let device = try DeviceSecret.load(for: bag.contents, at: location, io: io)
        let keys: [ClassKey]
        do throws(ProtectionError) {
            let kek = try bag.passphraseKEK(passphrase, device, at: location)
            keys = try bag.unwrapPassphraseClasses(kek)
        } catch {
            // Which code, never what was typed: a wrong passphrase is logged as the event, not its bytes.
            telemetry.log(.warning, "unlock refused", [
                "operation": "unlock", "error": .string("\(error.code)"), "duration_ms": Telemetry.millis(Telemetry.elapsed(since: t0)),
            ])
            throw error
        }
        try store.install(keys, timeout: timeout)
        liveLock.unlock(autoLockAfterSeconds: timeout.map(Int.init), grace: grace)
        let ns = Telemetry.elapsed(since: t0)
        telemetry.metrics.unlockDuration.recordNanoseconds(ns)
        telemetry.log(.info, "unlocked domain", [
            "operation": "unlock", "timeout": "\(timeout.map(String.init) ?? "none")", "duration_ms": Telemetry.millis(ns),
            "generations": "\(ProtectionClass.allCases.compactMap { c in bag.contents.current(c).map { "\(c)=\($0.generation)" } }.joined(separator: ","))",
        ])
    }
}

// MARK: - 3. Create or open a protected file (the mechanisms: Files/ProtectedFiles.swift)

extension ProtectedFiles {
    /// Creates a new, empty protected file at `path` (which must not exist) and opens it for writing.
    ///
    /// Class `completeUnlessOpen` can be created while locked: its per-file key
    /// is sealed to the class public key.
    ///
    /// The new file is committed by its first `sync()`: from then on in-place
    /// changes are journaled (FORMAT.md §6.7). Before it, like any file never
    /// fsynced, a crash can leave it missing, empty or failing authentication.
    /// - Parameters:
    ///   - path: where the file goes; nothing may be there (a symbolic link is not followed).
    ///   - protection: the class whose key wraps the new file's key.
    /// - Returns: a handle for reading and writing; `close()` it.
    /// - Throws: `.alreadyExists`, `.locked`, `.invalidArgument` (bad options), `.io`.
    public func create(_ path: String, protection: ProtectionClass) throws(ProtectionError) -> ProtectedFileHandle {
        try create(path, protection: protection, reportedAs: path, journaled: true, via: .filesCreate)
    }

    /// Opens the protected file at `path` for reading, or for reading and writing.
    ///
    /// Verifies the header (key wrap and MAC) and the last chunk, so `size` is authenticated.
    /// Opening for writing first finishes any change a crash interrupted (`recover`);
    /// opening for reading does so only if the file fails authentication, then tries again.
    /// - Parameters:
    ///   - path: the protected file.
    ///   - forWriting: also allow writes, appends and truncation (in-place changes are journaled).
    /// - Returns: a handle; `close()` it. A `complete` handle fails its next call with `.locked` once the domain locks.
    /// - Throws: `.notFound`, `.notProtected`, `.unsupportedVersion`, `.corruptHeader`,
    ///   `.authenticationFailed`, `.locked`, `.io`.
    public func open(_ path: String, forWriting: Bool = false) throws(ProtectionError) -> ProtectedFileHandle {
        try open(path, forWriting: forWriting, via: forWriting ? .filesOpenForWriting : .filesOpen)
    }

    // MARK: - 4. Read and write (whole files here; random access: Files/ProtectedFileHandle.swift)

    /// Reads the whole plaintext of `path`, under a coordinated read.
    ///
    /// - Parameter path: the protected file.
    /// - Returns: its plaintext, every chunk authenticated.
    /// - Throws: `.locked`, `.authenticationFailed`, `.notProtected`, `.notFound`, `.fileTooLarge` (use a handle), `.io`.
    public func read(_ path: String) throws(ProtectionError) -> [UInt8] {
        try read(path, via: .filesRead)
    }

    /// Atomically replaces `path` with a protected file holding `bytes`.
    ///
    /// Writes a temporary file beside `path`, fsyncs it, renames it over `path`
    /// and fsyncs the directory: readers see the old file or the new one, never
    /// a mix, and after a crash one of the two is there.
    /// - Parameters:
    ///   - bytes: the plaintext.
    ///   - path: the file to replace or create.
    ///   - protection: the class whose key wraps the new file's key.
    /// - Throws: `.locked` if `protection`'s key cannot wrap; `.io` for file-system
    ///   failures (the temporary file is removed and `path` is untouched).
    public func write(_ bytes: [UInt8], to path: String, protection: ProtectionClass) throws(ProtectionError) {
        try write(bytes, to: path, protection: protection, via: .filesWrite)
    }

    /// Atomically replaces `path` with a protected file holding `bytes` (see `write(_:to:protection:)`).
    ///
    /// - Parameters:
    ///   - bytes: the plaintext.
    ///   - path: the file to replace or create.
    ///   - protection: the class whose key wraps the new file's key.
    /// - Throws: `.locked` if `protection`'s key cannot wrap; `.io` (the temporary file is removed and `path` is untouched).
    public func write(_ bytes: UnsafeRawBufferPointer, to path: String, protection: ProtectionClass) throws(ProtectionError) {
        try write(bytes, to: path, protection: protection, via: .filesWrite)
    }
}

// MARK: - 5. Lock (every process's handles revoked: Keys/Live/LiveLock.swift, Keys/Live/Revocation.swift)

extension ProtectionDomain {
    /// Locks: tells every process `willLock`, waits `grace`, then removes classes A and B (every generation)
    /// from the key store; with `evictAll`, class C too (the analogue of a reboot).
    ///
    /// Every process with the domain open wipes the keys of its `complete` handles
    /// (and, with `evictAll`, `completeUntilFirstUserAuthentication` ones) and
    /// acknowledges before this returns; see `LiveLock`.
    /// - Parameters:
    ///   - evictAll: also lock class C (`completeUntilFirstUserAuthentication`), as a reboot would.
    ///   - grace: how long apps get to save between `willLock` and the lock
    ///     (`LiveLock.defaultGrace`, half a second); `.zero` locks at once without `willLock` (`dpctl lock --now`).
    /// - Returns: how many processes acknowledged, how many did not answer in time, and how long it took.
    /// - Throws: `.corruptKeybag`, `.keyringUnavailable`, `.io` when the keys cannot be removed.
    @discardableResult
    public func lock(evictAll: Bool = false, grace: Duration = LiveLock.defaultGrace) throws(ProtectionError) -> LiveLock.LockReport {
        let bag = try cache.bag()
        let classes: Set<ProtectionClass> = evictAll ? [.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication] : LiveLock.lockClasses
        let report = try liveLock.lock(classes, grace: grace) { () throws(ProtectionError) in
            try store.evict(evictAll ? Set(ProtectionClass.allCases) : [.complete, .completeUnlessOpen], generations: bag.generations, all: evictAll)
        }
        telemetry.log(.info, "locked domain", [
            "operation": "lock", "evictAll": "\(evictAll)", "processes": "\(report.processesAcknowledged)", "duration_ms": "\(report.elapsedMillis)",
        ])
        return report
    }
}
