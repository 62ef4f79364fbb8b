@_spi(Testing) import DataProtectionKeys
import DataProtectionFormat
import ProtectionCrypto

extension ProtectionDomain {
    /// Binds the domain's passphrase KEK anew: to a key inside the TPM (`.tpm2(tcti:)`), or to the device secret file alone (`.file`).
    ///
    /// The class keys, the salt, the Argon2id parameters, the device secret and the recovery key stay the same; only
    /// what the passphrase classes (A–C) are wrapped under changes, so every protected file stays readable and nothing
    /// but the keybag is written.
    ///
    /// Crash safety: the keybag is replaced once, whole, through `DurableFile.write` (the one `AtomicReplace`: a
    /// temporary file, fsync, rename, fsync of the directory), under the keybag write lock. A crash before the rename
    /// leaves the old keybag (old binding), after it the new one; both open with the same passphrase, and a keybag
    /// with a half-written binding cannot exist. The TPM key is made before the write and never persisted in the TPM,
    /// so a crash leaves nothing there either; unbinding has nothing to evict for the same reason.
    ///
    /// Old copies of the keybag (backups) keep their old binding: a file-bound copy can still be guessed offline with
    /// the device secret. Rotate the class keys (`rotate`) to make such copies useless.
    /// - Parameters:
    ///   - binding: the new binding; asked for, a TPM is used or the call fails (never a silent fallback).
    ///   - passphrase: the current passphrase (a TPM-bound domain's TPM counts a wrong one).
    /// - Returns: the binding the domain had; when it is already of the kind asked for, nothing is written.
    /// - Throws: `.wrongPassphrase` (the keybag is untouched); `.tpmUnavailable` when the new TPM does not answer;
    ///   for a TPM-bound domain, `.wrongTPM` and `.tpmLockout`; `.io`.
    @discardableResult
    public func bind(_ binding: KeyBinding, passphrase: borrowing SecretBytes) throws(ProtectionError) -> KeyBinding {
        let read = try cache.bag()
        let previous = read.binding(tcti: location.tpmTCTI)
        if previous == .file && binding == .file || previous != .file && binding != .file { return previous }
        // A TPM asked for must answer before anything is written.
        if case .tpm2(let tcti) = binding { try KeyBinding.probeTPM(tcti: tcti) }
        let device = try DeviceSecret.load(for: read.contents, at: location, io: io)
        try DeviceSecretRotation.writing(under: device, for: id, at: location, io: io) { () throws(ProtectionError) in
            // Read under the keybag write lock: a rotation may have added a generation meanwhile, which must not be lost.
            var bag = try cache.bag()
            let oldKEK = try bag.passphraseKEK(passphrase, device, at: location)
            var keys = try bag.unwrapPassphraseClasses(oldKEK)  // a wrong passphrase fails here, before anything is written
            for g in bag.generations[.none] ?? [] { if let k = try bag.unwrapNone(g, device) { keys.append(k) } }
            let kek = try bag.newPassphraseKEK(passphrase, device, binding: binding, at: location)
            try bag.rewrapRecoveryAuthentication(from: oldKEK, to: kek)
            for k in keys { try bag.add(k, kek: kek, device: device) }
            try bag.save(location, device, kek: kek, io: io)
            cache.update(bag)
        }
        logger?.info("domain \(id) bound to \(binding)")
        return previous
    }
}
