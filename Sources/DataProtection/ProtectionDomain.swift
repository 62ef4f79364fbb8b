@_spi(Testing) import DataProtectionKeys  // Keybag and DeviceSecret: testing SPI only so the keybag fuzzer can reach them
import DataProtectionFormat
import SystemLayer
import FileCoordination
import KernelKeyring
import Logging
import CoreMetrics
import DataProtectionTelemetry
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif
internal import PathSyntax

/// A protection domain: what one passphrase unlocks — its keybag, its class keys while unlocked, and its protected files.
///
/// The main path: `create` once (shows the recovery key), then `open`,
/// `unlock(passphrase:)`, work with `files`, `lock()`; `open`, `unlock` and
/// `lock` are in DataProtection.swift, the rest of the domain's life here.
/// Class keys A–C live in the key store only while unlocked; the keybag on
/// disk holds them wrapped.
public final class ProtectionDomain: Sendable {
    /// Where the domain's keybag and device secret are.
    public let location: DomainLocation
    /// The domain's identifier, which names its keys in the kernel keyring and its device secret.
    public let id: DomainID
    /// Where the domain's class keys live while unlocked, as chosen when it was opened.
    public let keyStore: KeyStore
    /// The domain's class keys with the lock that revokes them: what containers and `ProtectedFiles` take.
    public let keys: ClassKeys
    /// Protected files whose class keys come from this domain; their handles observe `lock` in every process.
    public let files: ProtectedFiles
    /// This process's attachment to the domain's live lock: events (`willLock`, `didLock`,
    /// `didUnlock`), `isProtectedDataAvailable`, and `retryAfterUnlock`.
    public let liveLock: LiveLock
    package let cache: KeybagCache
    package let store: any ClassKeyStore
    let io: any FileIO
    let logger: Logger?
    /// The domain's logger (with `domain` metadata) and metric objects, given to its live lock, files and coordinator.
    public let telemetry: Telemetry

    /// Attaches to an authenticated keybag (`create`, `open` in DataProtection.swift, `recover`).
    init(
        location: DomainLocation, bag: Keybag, keyStore: KeyStore, fileOptions: ProtectedFileOptions, io: any FileIO, logger: Logger?,
        metrics: (any MetricsFactory)? = nil
    ) throws(ProtectionError) {
        self.location = location
        self.id = bag.domainID
        self.keyStore = keyStore
        self.io = io
        let telemetry = Telemetry(logger: logger, domain: "\(bag.domainID)", factory: metrics)
        self.telemetry = telemetry
        self.logger = telemetry.logger
        cache = KeybagCache(location, io: io, bag: bag)
        let liveLock = try LiveLock(domainID: "\(bag.domainID)", telemetry: telemetry)
        self.liveLock = liveLock
        switch keyStore {
        case .kernel(let parent): store = KernelKeyStore(Keyring(logger: logger), id: bag.domainID, parent: parent, lockDirectory: liveLock.directory)
        case .inProcess: store = ProcessKeyStore()
        }
        let coordinator: FileCoordinator
        do throws(CoordinationError) { coordinator = FileCoordinator(domain: try CoordinationDomain.machineWide(), telemetry: telemetry) } catch {
            throw ProtectionError(.coordinationFailed, "unable to set up file coordination: \(error.message)", underlying: error)
        }
        keys = ClassKeys(provider: DomainClassKeys(cache: cache, store: store, liveLock: liveLock), revocation: liveLock.revocation)
        files = ProtectedFiles(keys: keys, options: fileOptions, coordinator: coordinator, io: io, sealsPerKeyNonce: AEADNonceMode.maxSealsPerKeyNonce)
    }

    /// Whether a keybag exists at `location`.
    public static func exists(at location: DomainLocation) -> Bool { SystemFileIO().exists(location.keybagPath) }

    /// Creates a new domain: device secret, fresh class keys, keybag; then shows the recovery key once.
    ///
    /// - Parameters:
    ///   - location: where the keybag and the device secret go.
    ///   - passphrase: the passphrase (locked memory).
    ///   - kdf: Argon2id parameters, e.g. `calibrateKDF(target:)`.
    ///   - keyStore: where class keys will live while unlocked.
    ///   - binding: `.file` (the device secret alone) or `.tpm2(tcti:)` (also a key inside that TPM; asked for, it
    ///     is used or the call fails: never a silent fallback). Unlocking later reaches the TPM at `location.tpmTCTI`.
    ///   - fileOptions: cipher and chunk size for new files.
    ///   - logger: where the domain logs unlock and lock (never key bytes); nil for none.
    ///   - metrics: where the domain's counters and timers go; nil for the process's bootstrapped swift-metrics backend.
    ///   - present: receives the recovery key after the keybag is durable; show it to the person once.
    /// - Returns: the new domain, open and locked.
    /// - Throws: `.alreadyExists` when a keybag is there; `.tpmUnavailable` when `.tpm2` was asked and its TPM does not
    ///   answer (nothing is written); `.keyringUnavailable`; `.insecurePermissions`; `.io`.
    public static func create(
        at location: DomainLocation, passphrase: borrowing SecretBytes, kdf: Argon2Parameters, keyStore: KeyStore = .kernel(.user),
        binding: KeyBinding = .file, fileOptions: ProtectedFileOptions = .init(), logger: Logger? = nil, metrics: (any MetricsFactory)? = nil,
        present: (borrowing RecoveryKey) throws(ProtectionError) -> Void
    ) throws(ProtectionError) -> ProtectionDomain {
        try create(
            at: location, passphrase: passphrase, kdf: kdf, keyStore: keyStore, binding: binding, fileOptions: fileOptions, io: SystemFileIO(),
            logger: logger, metrics: metrics, present: present)
    }

    /// `create(at:passphrase:kdf:keyStore:binding:fileOptions:logger:metrics:present:)` through the file-system seam `io` (tests that inject faults).
    package static func create(
        at location: DomainLocation, passphrase: borrowing SecretBytes, kdf: Argon2Parameters, keyStore: KeyStore = .kernel(.user),
        binding: KeyBinding = .file, fileOptions: ProtectedFileOptions = .init(), io: any FileIO, logger: Logger? = nil,
        metrics: (any MetricsFactory)? = nil, present: (borrowing RecoveryKey) throws(ProtectionError) -> Void
    ) throws(ProtectionError) -> ProtectionDomain {
        try checkStore(keyStore, logger)
        guard !exists(at: location) else {
            throw ProtectionError(.alreadyExists, "a protection domain already exists at '\(location.home)'; use it, or destroy it first with `dpctl wipe`", path: location.keybagPath)
        }
        guard kdf.isValid else { throw ProtectionError(.invalidArgument, "Argon2id parameters out of range (ops \(kdf.opsLimit), memory \(kdf.memLimit) bytes)") }
        // A TPM asked for must answer before anything is written.
        if case .tpm2(let tcti) = binding { try KeyBinding.probeTPM(tcti: tcti) }
        try PrivatePath.makeDirectory(location.home)
        let id = try DomainID.random()
        let device = try DeviceSecret.create(for: id, at: location, io: io)
        let recovery = try RecoveryKey.random()
        let bag = try Keybag.create(id: id, passphrase: passphrase, kdf: kdf, device: device, recovery: recovery, binding: binding, at: location, io: io)
        try present(recovery)
        logger?.info("created domain", metadata: ["domain": "\(id)", "operation": "create", "path": "\(location.home)"])
        return try ProtectionDomain(location: location, bag: bag, keyStore: keyStore, fileOptions: fileOptions, io: io, logger: logger, metrics: metrics)
    }

    /// Refuses a kernel key store the kernel refuses (one `.keyringUnavailable`), before anything is read or written.
    static func checkStore(_ keyStore: KeyStore, _ logger: Logger?) throws(ProtectionError) {
        guard case .kernel = keyStore else { return }
        do throws(KeyringError) { try Keyring.checkAvailable(logger: logger) } catch {
            throw error.code == .unavailable ? DomainKeyring.unavailable(error) : DomainKeyring.translate(error)
        }
    }

    // MARK: Lock state (unlock and lock: DataProtection.swift)

    /// The lock state of every class, the auto-lock deadline and the keyring key ids.
    public func status() throws(ProtectionError) -> DomainStatus {
        let bag = try cache.bag()
        var classes: [ClassStatus] = []
        for c in ProtectionClass.allCases {
            let gens = bag.generations[c] ?? []
            let current = bag.contents.current(c)?.generation ?? 0
            var serials: [UInt32: Int32] = [:]
            var unlocked = c == .none
            if c != .none {
                // Unlocked only when both say so: the key is in the store and the live lock's page (the one answer every
                // admission reads; a fresh page, before the first unlock since boot, says locked) does not say locked.
                unlocked = try store.isPresent(c, current) && !liveLock.isLocked(c)
                for g in gens { if let s = try store.serial(c, g) { serials[g] = s } }
            }
            classes.append(ClassStatus(
                protectionClass: c, unlocked: unlocked, canCreate: unlocked || c.usesPublicKeySealing,
                currentGeneration: current, generations: gens, keySerials: serials))
        }
        let pending = try RotationJournal.read(location, io: io).map { "\($0.protectionClass.name) \($0.from.map(String.init).joined(separator: ","))→\($0.to)" }
        return DomainStatus(
            id: id, home: location.home, keyStore: keyStore, classes: classes,
            autoLockDeadline: try store.deadline(), kdf: bag.contents.kdf, pendingRotation: pending, binding: bag.binding(tcti: location.tpmTCTI))
    }

    // MARK: Passphrase and recovery

    /// Changes the passphrase: rewraps the class keys only (O(1) in the number of files), under a new device secret.
    ///
    /// Every copy of the keybag from before (a backup, a synced folder) stops opening on this machine,
    /// even with the old passphrase: the device secret it was sealed under is shredded (see
    /// `DeviceSecretRotation` for the order of the steps: a crash leaves a keybag that unlocks with the
    /// old passphrase or the new one). The recovery key still opens old copies, by design.
    /// - Parameters:
    ///   - old: the current passphrase.
    ///   - new: the new passphrase.
    ///   - kdf: new Argon2id parameters; nil keeps the stored ones. A fresh salt is always drawn.
    /// - Throws: `.wrongPassphrase` for `old` (the keybag is untouched).
    public func changePassphrase(old: borrowing SecretBytes, new: borrowing SecretBytes, kdf: Argon2Parameters? = nil) throws(ProtectionError) {
        let read = try cache.bag()
        let device = try DeviceSecret.load(for: read.contents, at: location, io: io)
        let oldKEK = try read.passphraseKEK(old, device, at: location)
        _ = try read.unwrapPassphraseClasses(oldKEK)  // a wrong passphrase fails here, before anything is written
        let rotation = try DeviceSecretRotation.begin(for: id, replacing: try device.identifier(), at: location, io: io)
        // Read again under the keybag write lock: a rotation may have added a generation meanwhile, which must not be lost.
        var bag = try cache.bag()
        var keys = try bag.unwrapPassphraseClasses(oldKEK)
        for g in bag.generations[.none] ?? [] { if let k = try bag.unwrapNone(g, device) { keys.append(k) } }
        bag.contents.salt = try crypto { () throws(CryptoError) in try SecureRandom.bytes(PasswordHash.saltSize) }
        if let kdf { bag.contents.kdf = kdf }
        // The binding is kept: a TPM-bound keybag gets a new TPM key whose auth value follows the new passphrase.
        let kek = try bag.newPassphraseKEK(new, rotation.secret, binding: bag.binding(tcti: location.tpmTCTI), at: location)
        try bag.rewrapRecoveryAuthentication(from: oldKEK, to: kek)
        for k in keys { try bag.add(k, kek: kek, device: rotation.secret) }
        try bag.save(location, rotation.secret, kek: kek, io: io)
        cache.update(bag)
        try rotation.finish()
    }

    /// Restores a domain with its recovery key: new device secret, new passphrase, same class keys (files stay readable).
    ///
    /// Works on a copy of the home on a new machine (no device secret there),
    /// and after a forgotten passphrase. Idempotent: if it is interrupted, run it again.
    /// Only the recovery key is trusted on this path: the recovery entries must carry a valid MAC under
    /// a key derived from it, so nobody holding a copy of the keybag can plant a class key; class B's
    /// public key is recomputed; pass `kdf` (e.g. `calibrateKDF()`) rather than reuse stored parameters.
    /// A keybag whose recovery entries carry no MAC (format 1, or upgraded from it without the recovery
    /// key) is recovered with a fresh current generation of every class, so that no key anyone could have
    /// planted there is used for new files; its old generations still open existing files.
    /// - Throws: `.wrongPassphrase` for a mistyped or foreign recovery key; `.notFound`; `.corruptKeybag`
    ///   naming the keybag when its recovery entries do not authenticate (nothing is changed); `.tpmUnavailable`
    ///   when the binding asks for a TPM that does not answer (nothing is changed).
    /// - Parameters:
    ///   - location: where the domain's home (with the keybag to recover) and its device directory are.
    ///   - recoveryKey: the key `init` showed once.
    ///   - newPassphrase: the passphrase that unlocks the domain from now on.
    ///   - kdf: Argon2id parameters for the new passphrase; nil keeps the stored ones.
    ///   - binding: the recovered keybag's binding; nil keeps the kind the keybag had, bound to this machine
    ///     (a TPM-bound domain gets a new key in the TPM at `location.tpmTCTI`).
    ///   - keyStore: where the class keys live while unlocked (the kernel keyring by default).
    ///   - fileOptions: options of the domain's `files`.
    ///   - logger: where recovery is logged; nil for nowhere.
    ///   - metrics: where the domain's counters and timers go; nil for the process's bootstrapped swift-metrics backend.
    public static func recover(
        at location: DomainLocation, recoveryKey: borrowing RecoveryKey, newPassphrase: borrowing SecretBytes, kdf: Argon2Parameters? = nil,
        binding: KeyBinding? = nil, keyStore: KeyStore = .kernel(.user), fileOptions: ProtectedFileOptions = .init(), logger: Logger? = nil,
        metrics: (any MetricsFactory)? = nil
    ) throws(ProtectionError) -> ProtectionDomain {
        try checkStore(keyStore, logger)
        let io: any FileIO = SystemFileIO()
        let path = location.keybagPath
        let (old, _, _) = try Keybag.parseFile(location, io: io)
        var (keys, authenticated): ([ClassKey], Bool)
        do throws(ProtectionError) { (keys, authenticated) = try Keybag(contents: old).unwrapWithRecovery(recoveryKey) } catch where error.code == .corruptKeybag {
            throw ProtectionError(.corruptKeybag, "unable to recover from '\(path)': \(error.message)", path: path)
        }
        if !authenticated {
            for c in ProtectionClass.allCases {
                keys.append(try ClassKey.generate(c, generation: (old.current(c)?.generation ?? 0) + 1))
            }
            logger?.warning(
                "recovering from a keybag whose recovery entries are not authenticated (format 1): every class gets a fresh current generation",
                metadata: ["domain": "\(old.domainID)", "operation": "recover", "path": "\(path)"])
        }
        let binding = binding ?? Keybag(contents: old).binding(tcti: location.tpmTCTI)
        if case .tpm2(let tcti) = binding { try KeyBinding.probeTPM(tcti: tcti) }
        let rotation = try DeviceSecretRotation.begin(for: old.domainID, replacing: nil, at: location, io: io)
        let salt = try crypto { () throws(CryptoError) in try SecureRandom.bytes(PasswordHash.saltSize) }
        var bag = Keybag(contents: KeybagContents(domainID: old.domainID, kdf: kdf ?? old.kdf, salt: salt, recoveryPublicKey: old.recoveryPublicKey, entries: []))
        let kek = try bag.newPassphraseKEK(newPassphrase, rotation.secret, binding: binding, at: location)
        try bag.authenticateRecovery(with: recoveryKey, kek: kek)
        for k in keys { try bag.add(k, kek: kek, device: rotation.secret) }
        try bag.save(location, rotation.secret, kek: kek, io: io)
        try rotation.finish()
        logger?.info("recovered domain: new passphrase, device secret rotated", metadata: [
            "domain": "\(old.domainID)", "operation": "recover", "path": "\(path)", "classKeys": "\(keys.count)",
            "generations": "\(keys.map { "\($0.protectionClass)=\($0.generation)" }.joined(separator: ","))",
        ])
        return try ProtectionDomain(location: location, bag: bag, keyStore: keyStore, fileOptions: fileOptions, io: io, logger: logger, metrics: metrics)
    }

    // MARK: Files and destruction

    /// Moves a protected file to class `c` by rewrapping its per-file key (header only).
    ///
    /// - Parameters:
    ///   - path: the protected file.
    ///   - c: its new class.
    /// - Returns: `.rewrapped(from:generation:)`, or `.unchanged` when the file was of class `c` already.
    /// - Throws: `.locked` when the file's class key (or, for A and C, the new one) is unavailable;
    ///   `.notProtected`, `.authenticationFailed`, `.notFound`, `.io` (see `ProtectedFiles.rewrap(_:to:generation:sync:)`).
    public func setClass(_ path: String, to c: ProtectionClass) throws(ProtectionError) -> RewrapOutcome {
        try files.rewrap(path, to: c)
    }

    /// Crypto-shred: evicts every key, then destroys the keybag, the rotation journal and the device secret.
    ///
    /// Afterwards no protected file of the domain can be read by anyone
    /// holding only this machine — nor with the recovery key, since the keybag
    /// (which the recovery key opens) is gone. A backup of the keybag together
    /// with the recovery key still opens files from a backup; wipe cannot reach those.
    /// - Parameter grace: how long apps get between `willLock` and the lock that starts the wipe; `.zero` for none.
    public func wipe(grace: Duration = LiveLock.defaultGrace) throws(ProtectionError) {
        let bag = try cache.bag()
        try liveLock.lock([.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication], grace: grace) { () throws(ProtectionError) in
            try store.evict(Set(ProtectionClass.allCases), generations: bag.generations, all: true)
        }
        try DurableFile.shred(location.journalPath, io: io)
        try DurableFile.shred(location.keybagPath, io: io)
        try DeviceSecret.destroy(for: id, at: location, io: io)
        logger?.info("wiped domain \(id)")
    }

    /// Argon2id parameters taking about `target` on this machine: 3 passes, memory scaled to fit.
    ///
    /// Memory is what makes guessing costly on GPUs, so the passes stay at 3
    /// (libsodium's moderate preset) and the memory is scaled between 64 MiB
    /// and 1 GiB: probes at 64 MiB give a first estimate, runs at that
    /// estimate correct it (large allocations cost more per MiB here: fresh
    /// pages are slow to touch in a VM). Each step keeps the fastest of its
    /// runs, since other load on the machine only ever slows a run down.
    public static func calibrateKDF(target: Duration = .milliseconds(500)) throws(ProtectionError) -> Argon2Parameters {
        let goal = seconds(target)
        func run(_ mib: Int) throws(ProtectionError) -> Double {
            let pass = try crypto { () throws(CryptoError) in try SecretBytes.random(count: 16) }
            let salt = [UInt8](repeating: 0, count: PasswordHash.saltSize)
            let clock = ContinuousClock(), start = clock.now
            _ = try crypto { () throws(CryptoError) in
                try PasswordHash.deriveKey(passphrase: pass, salt: salt, parameters: Argon2Parameters(opsLimit: 3, memLimit: UInt64(mib) << 20))
            }
            return max(1e-3, seconds(clock.now - start))
        }
        func clamp(_ x: Double) -> Int { min(1024, max(64, Int(x.rounded()))) }
        let estimate = clamp(64 * goal / min(try run(64), try run(64), try run(64)))
        let mib = clamp(Double(estimate) * goal / min(try run(estimate), try run(estimate)))
        return Argon2Parameters(opsLimit: 3, memLimit: UInt64(mib) << 20)
    }

    private static func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
}

extension Keybag {
    /// The generations the keybag holds, per class, oldest first.
    var generations: [ProtectionClass: [UInt32]] {
        var out: [ProtectionClass: [UInt32]] = [:]
        for e in contents.entries { out[e.protectionClass, default: []].append(e.generation) }
        return out.mapValues { $0.sorted() }
    }
}

/// One class's lock state.
public struct ClassStatus: Sendable, Equatable {
    /// The class this status is about.
    public let protectionClass: ProtectionClass
    /// Whether existing files of the class can be opened now.
    public let unlocked: Bool
    /// Whether new files of the class can be created now (class B: always).
    public let canCreate: Bool
    /// The class-key generation new files are wrapped with.
    public let currentGeneration: UInt32
    /// Every generation the keybag holds (old ones still open files not yet rewrapped), oldest first.
    public let generations: [UInt32]
    /// Kernel key serial per unlocked generation (empty for the in-process store and class `none`).
    public let keySerials: [UInt32: Int32]
}

/// What `dpctl status` shows.
public struct DomainStatus: Sendable, Equatable {
    /// The domain's identifier.
    public let id: DomainID
    /// The domain's home directory.
    public let home: String
    /// Where its class keys live while unlocked.
    public let keyStore: KeyStore
    /// One status per class, in `ProtectionClass.allCases` order.
    public let classes: [ClassStatus]
    /// UNIX seconds at which classes A and B lock by themselves, if `unlock --timeout` set one.
    public let autoLockDeadline: Int64?
    /// The Argon2id parameters the passphrase is derived with.
    public let kdf: Argon2Parameters
    /// "class old→new" when a rotation is unfinished.
    public let pendingRotation: String?
    /// What binds the passphrase KEK to this machine: the device secret file alone, or also a TPM key.
    public let binding: KeyBinding
}
