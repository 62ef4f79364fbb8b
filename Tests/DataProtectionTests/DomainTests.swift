import DataProtectionFormat
import Foundation
import DataProtection
import KernelKeyring
import ProtectionCrypto
import XCTest

/// A domain's life: create, unlock, lock, passphrase change, recovery, wipe — with keys in the real kernel keyring.
final class DomainTests: DomainTestCase {
    func testLockSemanticsPerClass() throws {
        let (d, _) = try makeDomain()
        let dir = root
        try d.unlock(passphrase: try secret("correct horse"))
        for c in ProtectionClass.allCases { try d.files.write([1, 2, 3], to: "\(dir)/\(c.name)", protection: c) }
        try d.lock()
        assertProtectionError([.locked]) { _ = try d.files.read("\(dir)/complete") }
        assertProtectionError([.locked]) { _ = try d.files.read("\(dir)/completeUnlessOpen") }
        XCTAssertEqual(try d.files.read("\(dir)/completeUntilFirstUserAuthentication"), [1, 2, 3])
        XCTAssertEqual(try d.files.read("\(dir)/none"), [1, 2, 3])
        // Create while locked: B succeeds (sealed to its public key), A fails and leaves nothing.
        try d.files.write([4], to: "\(dir)/b2", protection: .completeUnlessOpen)
        assertProtectionError([.locked]) { try d.files.write([5], to: "\(dir)/a2", protection: .complete) }
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/a2"))
        // Another process (a second domain object, as another dpctl would be) sees the same state.
        let other = try ProtectionDomain.open(at: location, keyStore: store)
        XCTAssertEqual(try other.status().classes.map(\.unlocked), [false, false, true, true])
        try d.lock(evictAll: true)
        assertProtectionError([.locked]) { _ = try d.files.read("\(dir)/completeUntilFirstUserAuthentication") }
        XCTAssertEqual(try d.files.read("\(dir)/none"), [1, 2, 3])
        try other.unlock(passphrase: try secret("correct horse"))
        XCTAssertEqual(try d.files.read("\(dir)/complete"), [1, 2, 3])
        XCTAssertEqual(try d.files.read("\(dir)/b2"), [4])
    }

    func testLockInOneDomainObjectTakesEffectInAnotherAtOnce() throws {
        let (d, _) = try makeDomain()
        try d.unlock(passphrase: try secret("correct horse"))
        try d.files.write([9], to: root + "/a", protection: .complete)
        let reader = try ProtectionDomain.open(at: location, keyStore: store)
        XCTAssertEqual(try reader.files.read(root + "/a"), [9])  // caches the key serial
        try d.lock()
        assertProtectionError([.locked]) { _ = try reader.files.read(self.root + "/a") }
    }

    func testWrongPassphraseChangesNothing() throws {
        let (d, _) = try makeDomain()
        let before = try readBytes(location.keybagPath)
        assertProtectionError([.wrongPassphrase]) { try d.unlock(passphrase: try self.secret("Correct horse")) }
        assertProtectionError([.wrongPassphrase]) { try d.changePassphrase(old: try self.secret("nope"), new: try self.secret("x")) }
        XCTAssertEqual(try readBytes(location.keybagPath), before)
        XCTAssertFalse(try d.status().classes[0].unlocked)
    }

    func testPassphraseChangeRewrapsOnlyAndFilesStayReadable() throws {
        let (d, _) = try makeDomain()
        try d.unlock(passphrase: try secret("correct horse"))
        try d.files.write([7, 7], to: root + "/a", protection: .complete)
        let fileBefore = try readBytes(root + "/a")
        try d.changePassphrase(old: try secret("correct horse"), new: try secret("battery staple"))
        XCTAssertEqual(try readBytes(root + "/a"), fileBefore, "a passphrase change must not touch files")
        try d.lock(evictAll: true)
        assertProtectionError([.wrongPassphrase]) { try d.unlock(passphrase: try self.secret("correct horse")) }
        try d.unlock(passphrase: try secret("battery staple"))
        XCTAssertEqual(try d.files.read(root + "/a"), [7, 7])
    }

    /// The home copied to a new machine (no device secret) is opened with the recovery key alone.
    func testRecoverOnAnotherMachineWithTheRecoveryKey() throws {
        let (d, recovery) = try makeDomain()
        try d.unlock(passphrase: try secret("correct horse"))
        for c in ProtectionClass.allCases { try d.files.write(Array(c.name.utf8), to: "\(root)/\(c.name)", protection: c) }
        try d.lock(evictAll: true)
        let moved = DomainLocation(home: root + "/copied-home", deviceDirectory: root + "/new-devices")
        try FileManager.default.copyItem(atPath: location.home, toPath: moved.home)
        assertProtectionError([.notFound]) { _ = try ProtectionDomain.open(at: moved, keyStore: self.store) }
        assertProtectionError([.wrongPassphrase]) {
            _ = try ProtectionDomain.recover(at: moved, recoveryKey: try RecoveryKey.random(), newPassphrase: try self.secret("n"), keyStore: self.store)
        }
        let r = try ProtectionDomain.recover(at: moved, recoveryKey: try RecoveryKey(text: try secret(recovery)), newPassphrase: try secret("new one"), keyStore: store)
        try r.unlock(passphrase: try secret("new one"))
        for c in ProtectionClass.allCases { XCTAssertEqual(try r.files.read("\(root)/\(c.name)"), Array(c.name.utf8)) }
        // Recovering again (e.g. after an interruption) works and leaves the files readable.
        _ = try ProtectionDomain.recover(at: moved, recoveryKey: try RecoveryKey(text: try secret(recovery)), newPassphrase: try secret("newer"), keyStore: store)
        XCTAssertEqual(try r.files.read("\(root)/none"), Array("none".utf8))
    }

    /// On the recovery path class B's public key is recomputed from its private key: a swapped wrapped public key is never used.
    func testRecoveryRecomputesTheClassBPublicKey() throws {
        let (_, recovery) = try makeDomain()
        var (contents, _, _) = try KeybagContents.parse(try readBytes(location.keybagPath))
        let i = try XCTUnwrap(contents.entries.firstIndex { $0.protectionClass == .completeUnlessOpen })
        contents.entries[i].wrappedPublicKey = try SecureRandom.bytes(KeybagContents.wrappedSize)
        try writeForgedKeybag(contents)  // the MAC cannot be forged without the device secret
        let r = try ProtectionDomain.recover(at: location, recoveryKey: try RecoveryKey(text: try secret(recovery)), newPassphrase: try secret("n"), keyStore: store)
        try r.files.write([6], to: root + "/b", protection: .completeUnlessOpen)  // locked: sealed to the stored public key
        try r.unlock(passphrase: try secret("n"))
        XCTAssertEqual(try r.files.read(root + "/b"), [6])
    }

    func testWipeMakesEveryFileUnreadableAtOnce() throws {
        let (d, recovery) = try makeDomain()
        try d.unlock(passphrase: try secret("correct horse"))
        for c in ProtectionClass.allCases { try d.files.write([1], to: "\(root)/\(c.name)", protection: c) }
        try d.wipe()
        XCTAssertFalse(FileManager.default.fileExists(atPath: location.keybagPath))
        XCTAssertFalse(FileManager.default.fileExists(atPath: location.deviceSecretPath(d.id)))
        for c in ProtectionClass.allCases {
            assertProtectionError([.locked, .notFound, .authenticationFailed], c.name) { _ = try d.files.read("\(self.root)/\(c.name)") }
        }
        assertProtectionError([.notFound]) { _ = try ProtectionDomain.open(at: self.location, keyStore: self.store) }
        assertProtectionError([.notFound]) {
            _ = try ProtectionDomain.recover(at: self.location, recoveryKey: try RecoveryKey(text: try self.secret(recovery)), newPassphrase: try self.secret("x"), keyStore: self.store)
        }
        for name in ["dataprotection:\(d.id)", "dataprotection:\(d.id):expiring"] {
            XCTAssertThrowsError(try Keyring().search(.session, type: .user, description: name), "wipe must evict \(name)") {
                XCTAssertTrue([.notFound, .revoked].contains(($0 as? KeyringError)?.code), "\($0)")
            }
        }
    }

    func testKeysInTheKeyringAreNamedAndPrivateToTheOwner() throws {
        let (d, _) = try makeDomain()
        try d.unlock(passphrase: try secret("correct horse"), timeout: 600)
        let k = Keyring()
        // With a timeout: C in `dataprotection:<id>` (no expiry), A and B in `…:expiring` (deadline in the payload).
        let lasting = try k.search(.session, type: .user, description: "dataprotection:\(d.id)")
        let expiring = try k.search(.session, type: .user, description: "dataprotection:\(d.id):expiring")
        for key in [lasting, expiring] {
            let a = try k.describe(key)
            XCTAssertEqual(a.permissions, KeyPermissions.privateToOwner.union([.userWrite, .userSetAttribute]))
            XCTAssertEqual(a.uid, getuid())
            // The @p link that gave possession while installing is gone: a long-lived process keeps nothing linked.
            XCTAssertFalse(((try? k.children(of: .process)) ?? []).contains(key))
        }
        XCTAssertEqual(try k.payloadLength(of: lasting), 2 + 37)
        XCTAssertEqual(try k.payloadLength(of: expiring), 10 + 2 * 37)
        XCTAssertThrowsError(try k.search(.session, type: .keyring, description: "dataprotection:\(d.id)"), "no named keyring any more")
        func serials() throws -> [Int32?] { try d.status().classes.map { $0.keySerials[1] } }
        XCTAssertEqual(try serials(), [expiring.rawValue, expiring.rawValue, lasting.rawValue, nil], "class none never enters the keyring")
        let deadline = try XCTUnwrap(try d.status().autoLockDeadline)
        XCTAssertEqual(Double(deadline), Date().timeIntervalSince1970 + 600, accuracy: 5)

        // Lock: the expiring key goes (and the deadline with it); C's key stays, same serial.
        try d.lock(grace: .zero)
        XCTAssertEqual(try serials(), [nil, nil, lasting.rawValue, nil])
        XCTAssertNil(try d.status().autoLockDeadline)
        XCTAssertThrowsError(try k.search(.session, type: .user, description: "dataprotection:\(d.id):expiring"))
        // Unlock without a timeout: one key holds A, B and C, updated in place.
        try d.unlock(passphrase: try secret("correct horse"))
        XCTAssertEqual(try serials(), [lasting.rawValue, lasting.rawValue, lasting.rawValue, nil])
        XCTAssertEqual(try k.payloadLength(of: lasting), 2 + 3 * 37)
        XCTAssertNil(try d.status().autoLockDeadline)
        // A lock of A and B rewrites it with C alone; `evictAll` removes it.
        try d.lock(grace: .zero)
        XCTAssertEqual(try k.payloadLength(of: lasting), 2 + 37)
        try d.lock(evictAll: true, grace: .zero)
        XCTAssertThrowsError(try k.search(.session, type: .user, description: "dataprotection:\(d.id)"))
        XCTAssertEqual(try serials(), [nil, nil, nil, nil])
    }

    /// Keys of the 0.1 layout (a keyring with a key per class), left by an older dpctl, are not read — the domain
    /// reads locked — but `lock` evicts the locked classes' keys, and `unlock` removes the old keyring.
    func testKeysOfTheOldLayoutReadAsLockedAndLockAndUnlockRemoveThem() throws {
        let (d, _) = try makeDomain()
        let k = Keyring()
        func plant() throws -> [ProtectionClass: KeySerial] {
            let ring = try k.keyring(named: "dataprotection:\(d.id)", in: .session, permissions: KeyPermissions.privateToOwner.union([.userWrite, .userLink]))
            var keys: [ProtectionClass: KeySerial] = [:]
            for c in [ProtectionClass.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication] {
                keys[c] = try [UInt8](repeating: 1, count: 32).withUnsafeBytes { try k.add(.user, description: "dataprotection:\(d.id):\(c.name):1", payload: $0, to: ring, permissions: .privateToOwner) }
            }
            return keys
        }
        let old = try plant()
        XCTAssertEqual(try d.status().classes.map(\.unlocked), [false, false, false, true], "old-layout keys are not read")
        try d.lock(grace: .zero)
        for c in [ProtectionClass.complete, .completeUnlessOpen] {
            XCTAssertThrowsError(try k.payloadLength(of: old[c]!), "lock must evict the old \(c.name) key")
        }
        XCTAssertEqual(try k.payloadLength(of: old[.completeUntilFirstUserAuthentication]!), 32, "lock leaves C, as before")
        try d.unlock(passphrase: try secret("correct horse"))
        XCTAssertThrowsError(try k.search(.session, type: .keyring, description: "dataprotection:\(d.id)"), "unlock removes the old keyring")
        XCTAssertEqual(try d.status().classes.map(\.unlocked), [true, true, true, true])
        let again = try plant()
        try d.lock(evictAll: true, grace: .zero)
        XCTAssertThrowsError(try k.search(.session, type: .keyring, description: "dataprotection:\(d.id)"), "lock --evict-all removes the old keyring")
        XCTAssertThrowsError(try k.payloadLength(of: again[.completeUntilFirstUserAuthentication]!))
    }

    /// A lock of A and B replaces the one domain key's payload in place, so class C never reads as locked, not even
    /// for a moment, to a process reading it while another locks and unlocks. Fails against a lock that removes the
    /// domain key and adds a new one with C (a reader in between finds no key).
    func testClassCStaysReadableWhileAnotherDomainObjectLocksAndUnlocks() throws {
        let (d, _) = try makeDomain()
        try d.unlock(passphrase: try secret("correct horse"))
        try d.files.write([7], to: root + "/c", protection: .completeUntilFirstUserAuthentication)
        let reader = try ProtectionDomain.open(at: location, keyStore: store)
        let stop = ManagedAtomicFlag(), failures = ManagedCounter(), reads = ManagedCounter(), path = root + "/c"
        let thread = Thread {
            while !stop.isSet {
                do { _ = try reader.files.read(path); reads.add() } catch { failures.add() }
            }
        }
        thread.start()
        for _ in 0..<30 {
            try d.lock(grace: .zero)
            try d.unlock(passphrase: try secret("correct horse"))
        }
        stop.set()
        while !thread.isFinished { usleep(1000) }
        print("class C reads during 30 lock/unlock cycles: \(reads.value), failures \(failures.value)")
        XCTAssertGreaterThan(reads.value, 0)
        XCTAssertEqual(failures.value, 0, "class C read as locked while A and B were locked and unlocked")
    }

    func testInProcessStoreIsExplicitAndWorks() throws {
        let loc = location
        var dummy = ""
        let d = try ProtectionDomain.create(at: loc, passphrase: try secret("p"), kdf: .minimumForTests, keyStore: .inProcess) { (k) throws(ProtectionError) in dummy = (try? k.withText { String(decoding: $0, as: UTF8.self) }) ?? "" }
        XCTAssertFalse(dummy.isEmpty)
        try d.unlock(passphrase: try secret("p"))
        try d.files.write([3], to: root + "/a", protection: .complete)
        XCTAssertEqual(try d.files.read(root + "/a"), [3])
        XCTAssertTrue(try d.status().classes[0].keySerials.isEmpty)
        try d.lock()
        assertProtectionError([.locked]) { _ = try d.files.read(self.root + "/a") }
    }

    func testSetClassRewrapsHeaderOnly() throws {
        let (d, _) = try makeDomain()
        try d.unlock(passphrase: try secret("correct horse"))
        let data = [UInt8](repeating: 0xAB, count: 50_000)
        try d.files.write(data, to: root + "/f", protection: .complete)
        let before = try readBytes(root + "/f")
        for c in [ProtectionClass.completeUnlessOpen, .none, .completeUntilFirstUserAuthentication, .complete] {
            let from = try d.files.info(root + "/f").protectionClass
            XCTAssertEqual(try d.setClass(root + "/f", to: c), .rewrapped(from: from, generation: 1))
            XCTAssertEqual(try d.files.info(root + "/f").protectionClass, c)
            XCTAssertEqual(try d.files.read(root + "/f"), data)
        }
        let after = try readBytes(root + "/f")
        XCTAssertEqual(Array(after[176...]), Array(before[176...]), "contents must not be re-encrypted")
        XCTAssertEqual(try d.setClass(root + "/f", to: .complete), .unchanged)
        try d.lock()
        assertProtectionError([.locked]) { _ = try d.setClass(self.root + "/f", to: .none) }
    }
}

/// A flag and a counter two threads share (the test's reader thread and the test).
private final class ManagedAtomicFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    var isSet: Bool { lock.withLock { flag } }
    func set() { lock.withLock { flag = true } }
}

private final class ManagedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func add() { lock.withLock { count += 1 } }
}
