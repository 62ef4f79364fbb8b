// The keybag parser's fuzz harness, shared by the FuzzKeybag target (Fuzz/, through this target's
// product) and FuzzRegressionTests, so the replay applies the fuzzer's own oracles. The parser is
// DataProtectionFormat's public API; the unwrapping (Keybag, DeviceSecret) is DataProtection's testing SPI.
@_spi(Testing) import DataProtection
import DataProtectionFormat
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif

/// Parses arbitrary bytes as a keybag file; with the checksum and MAC repaired under a fixed
/// device secret, also authenticates it and unwraps every entry.
///
/// Oracles: a parse error must be `.corruptKeybag` or `.unsupportedVersion` and name the
/// keybag; bytes that parse must re-encode to exactly themselves; unwrapping an
/// authenticated keybag must end in keys or a typed `.wrongPassphrase`/`.corruptKeybag`.
/// The passphrase KEK is computed once (Argon2id runs at start-up, never per input).
public final class KeybagFuzzHarness {
    static let domain: [UInt8] = Array(repeating: 0x42, count: DomainID.size)
    static let salt: [UInt8] = Array(repeating: 0x5A, count: PasswordHash.saltSize)
    let location = DomainLocation(home: "/fuzz/home", deviceDirectory: "/fuzz/devices")
    let device: DeviceSecret
    let recovery: RecoveryKey
    let recoveryPublicKey: [UInt8]
    let kek: SecretBytes
    let id: DomainID

    /// Fixed secrets: device secret 32 × 0x44, recovery key 32 × 0x52, passphrase "fuzz".
    public init() throws(ProtectionError) {
        let id = try DomainID(bytes: Self.domain)
        self.id = id
        device = DeviceSecret(key: try Self.secret(String(repeating: "D", count: DeviceSecret.size)))
        recovery = RecoveryKey(key: try Self.secret(String(repeating: "R", count: 32)))
        recoveryPublicKey = try recovery.sealingKeyPair().publicKey.bytes
        let passphrase = try Self.secret("fuzz")
        kek = try Self.empty(id, recoveryPublicKey).passphraseKEK(passphrase, device, at: DomainLocation(home: "/nonexistent", deviceDirectory: "/nonexistent"))
    }

    /// `text`'s bytes in locked memory (the fixed secrets).
    static func secret(_ text: String) throws(ProtectionError) -> SecretBytes {
        do throws(CryptoError) { return try SecretBytes(utf8: text) } catch { throw ProtectionError(.io(ENOMEM), "unable to allocate a fuzz secret: \(error.message)", underlying: error) }
    }

    static func empty(_ id: DomainID, _ recoveryPublicKey: [UInt8]) -> Keybag {
        Keybag(contents: KeybagContents(domainID: id, kdf: .minimumForTests, salt: salt, recoveryPublicKey: recoveryPublicKey, entries: []))
    }

    /// Valid keybags (the current format) under the fixed secrets: 4, 6 and 8 entries (rotated generations), recovery entries authenticated.
    public func seeds() throws(ProtectionError) -> [[UInt8]] {
        var out: [[UInt8]] = []
        for extra in [0, 2, 4] {
            var bag = Self.empty(id, recoveryPublicKey)
            try bag.authenticateRecovery(with: recovery, kek: kek)
            for c in ProtectionClass.allCases { try bag.add(try ClassKey.generate(c, generation: 1), kek: kek, device: device) }
            for i in 0..<extra { try bag.add(try ClassKey.generate(ProtectionClass.allCases[i % 4], generation: 2), kek: kek, device: device) }
            out.append(try bag.fileBytes(device, kek: kek))
        }
        return out
    }

    /// `body` followed by its MAC under the fixed device secret and the checksum: what `Keybag.save` writes.
    func sealed(_ body: [UInt8]) throws(ProtectionError) -> [UInt8] {
        var b = body
        b += try Keybag.mac(body, device)
        b += try KeybagContents.checksum(b[...])
        return b
    }

    /// Runs one input; returns nil, or a description of the finding.
    public func run(_ input: [UInt8]) -> String? {
        if let finding = check(input) { return finding }
        // Mutants rarely keep a valid checksum and MAC: repair both so they reach the field checks and the unwrapping.
        let trailer = KeybagContents.macSize + KeybagContents.checksumSize
        guard input.count >= KeybagContents.headerSize + trailer, let repaired = try? sealed(Array(input.dropLast(trailer))), repaired != input else { return nil }
        return check(repaired)
    }

    func check(_ bytes: [UInt8]) -> String? {
        let contents: KeybagContents, body: ArraySlice<UInt8>, mac: [UInt8]
        do throws(ProtectionError) {
            (contents, body, mac) = try KeybagContents.parse(bytes)
        } catch {
            return expect(error, [.corruptKeybag, .unsupportedVersion], "parse")
        }
        guard Array(body) == contents.body() else { return "a keybag that parsed does not re-encode to the same bytes" }
        guard (try? Keybag.mac(Array(body), device)) == mac else { return nil }  // Keybag.load refuses it: nothing more is reachable
        let bag = Keybag(contents: contents)
        for e in contents.entries where e.protectionClass.usesPublicKeySealing {
            do throws(ProtectionError) {
                guard try bag.publicKey(e.protectionClass, e.generation, device) != nil else { return "the public key of generation \(e.generation) vanished" }
            } catch {
                if let f = expect(error, [.corruptKeybag], "unwrap a public key") { return f }
            }
        }
        for e in contents.entries where e.protectionClass == .none {
            do throws(ProtectionError) {
                guard try bag.unwrapNone(e.generation, device) != nil else { return "class none generation \(e.generation) vanished" }
            } catch {
                if let f = expect(error, [.corruptKeybag], "unwrap class none") { return f }
            }
        }
        do throws(ProtectionError) {
            let keys = try bag.unwrapPassphraseClasses(kek)
            guard keys.count == contents.entries.count(where: { $0.protectionClass != .none }) else { return "unwrapPassphraseClasses returned \(keys.count) keys" }
        } catch {
            if let f = expect(error, [.wrongPassphrase, .corruptKeybag], "unwrap with the passphrase") { return f }
        }
        do throws(ProtectionError) {
            let (keys, _) = try bag.unwrapWithRecovery(recovery)
            guard keys.count == contents.entries.count else { return "unwrapWithRecovery returned \(keys.count) keys" }
        } catch {
            if let f = expect(error, [.wrongPassphrase, .corruptKeybag], "unwrap with the recovery key") { return f }
        }
        return nil
    }

    func expect(_ error: ProtectionError, _ codes: [ProtectionError.Code], _ step: String) -> String? {
        guard codes.contains(error.code) else { return "\(step): unexpected error code \(error.code): \(error.message)" }
        guard !error.message.isEmpty, error.message.contains("keybag") || error.message.contains("recovery") || error.message.contains("passphrase") || error.message.contains("version") else {
            return "\(step): a message that does not say what is wrong: \(error.message)"
        }
        return nil
    }
}
