import DataProtectionFormat
import ProtectionCrypto
internal import TPMBinding

/// What binds a domain's passphrase KEK to the machine: the device secret file alone, or also a key inside a TPM 2.0.
///
/// With `.tpm2`, unwrapping classes A–C needs an HMAC computed by a key that never leaves the TPM, authorised by a
/// value derived from the passphrase: a copy of the home and the device directory is useless on another machine,
/// and every wrong passphrase is an authorisation failure the TPM counts towards its dictionary-attack lockout.
public enum KeyBinding: Sendable, Equatable, CustomStringConvertible {
    /// The device secret file alone (no hardware binding).
    case file
    /// An HMAC key inside the TPM reached through `tcti` (tpm2-tss TCTI string, e.g. `device:/dev/tpmrm0`).
    case tpm2(tcti: String)

    /// "tpm2" or "file (no hardware binding)", as `dpctl status` shows it.
    public var description: String {
        switch self {
        case .file: "file (no hardware binding)"
        case .tpm2: "tpm2"
        }
    }

    /// Whether a TPM answers at `tcti` and can create its storage key (what `dpctl init --binding auto` asks).
    /// - Throws: `.tpmUnavailable` naming the TCTI and the cause.
    public static func probeTPM(tcti: String) throws(ProtectionError) {
        do throws(TPMError) { try TPM2Device(tcti: tcti).probe() } catch { throw translate(error, tcti: tcti, keybag: nil) }
    }
}

extension Keybag {
    /// The binding this keybag records, with `tcti` for a TPM one.
    package func binding(tcti: String) -> KeyBinding { contents.binding == nil ? .file : .tpm2(tcti: tcti) }

    /// The TPM auth value for `stretched`: a BLAKE2b subkey of the Argon2id output (so it costs one Argon2id per guess too).
    package static func tpmAuth(_ stretched: borrowing SecretBytes) throws(ProtectionError) -> SecretBytes {
        try crypto { () throws(CryptoError) in try KeyDerivation.subkey(of: stretched, context: "dptpmaut", id: 1) }
    }

    /// What the TPM key is asked to HMAC: a label and the domain, so one TPM key answers for one domain only.
    package static func tpmMessage(_ id: DomainID) -> [UInt8] { Array("dp-tpm-hmac-v1".utf8) + id.bytes }

    /// Replaces the binding with a new one of kind `binding` for `stretched` (a new TPM key authorised by its auth value).
    ///
    /// Called wherever a new salt (so a new Argon2id output) is written: create, `passwd`, `recover`. The old TPM key
    /// needs no eviction: it was never persistent in the TPM, and its blobs leave with the keybag they were in.
    /// - Throws: `.tpmUnavailable` when `binding` is `.tpm2` and its TPM does not answer or refuses.
    mutating func rebind(_ binding: KeyBinding, _ stretched: borrowing SecretBytes) throws(ProtectionError) {
        guard case .tpm2(let tcti) = binding else {
            contents.binding = nil
            return
        }
        let auth = try Self.tpmAuth(stretched)
        do throws(TPMError) {
            let blobs = try TPM2Device(tcti: tcti).createHMACKey(auth: auth)
            contents.binding = .tpm2(public: blobs.public, private: blobs.private)
        } catch { throw translate(error, tcti: tcti, keybag: nil) }
    }

    /// The secret `entangle` mixes with the device secret: the Argon2id output itself (file binding), or keyed BLAKE2b
    /// (key: the TPM key's HMAC of `tpmMessage`) of it (TPM binding), so the KEK needs the TPM's answer.
    /// - Throws: `.wrongPassphrase` (the TPM counted it), `.tpmLockout`, `.wrongTPM`, `.tpmUnavailable`, `.corruptKeybag`.
    package func bound(_ stretched: borrowing SecretBytes, tcti: String, keybag path: String) throws(ProtectionError) -> SecretBytes {
        guard case .tpm2(let pub, let priv)? = contents.binding else { return try crypto { () throws(CryptoError) in try stretched.duplicate() } }
        let answer = try tpmAnswer(TPMKeyBlobs(public: pub, private: priv), auth: try Self.tpmAuth(stretched), tcti: tcti, keybag: path)
        return try crypto { () throws(CryptoError) in
            var h = try StreamingHash(key: answer)
            Array("dp-tpm-bind-v1".utf8).withUnsafeBytes { h.update($0) }
            stretched.withUnsafeBytes { h.update($0) }
            return try h.finalizeSecret()
        }
    }
}

extension Keybag {
    /// The TPM key's HMAC of `tpmMessage`, authorised by `auth`.
    private func tpmAnswer(_ key: TPMKeyBlobs, auth: borrowing SecretBytes, tcti: String, keybag path: String) throws(ProtectionError) -> SecretBytes {
        do throws(TPMError) { return try TPM2Device(tcti: tcti).hmac(key, auth: auth, message: Self.tpmMessage(domainID)) } catch {
            throw translate(error, tcti: tcti, keybag: path)
        }
    }
}

/// The `ProtectionError` for a TPM failure: the cause and the fix, each said once (dpctl adds no hint to these codes);
/// the TPM's decoded response code stays in `underlying`.
private func translate(_ e: TPMError, tcti: String, keybag path: String?) -> ProtectionError {
    switch e.code {
    case .unavailable, .refused:
        let subject = path.map { "the keybag '\($0)' is bound to a TPM, but " } ?? ""
        let otherwise = path == nil ? "or create the domain with --binding file" : "or, to use the domain without it, run `dpctl recover --binding file` with the recovery key"
        return ProtectionError(.tpmUnavailable, "\(subject)\(e.message); pass the TPM with --tpm-tcti or DATAPROTECTION_TPM_TCTI, \(otherwise)", path: path, underlying: e)
    case .wrongTPM:
        return ProtectionError(.wrongTPM, "the keybag '\(path ?? "")' is bound to another TPM than the one at '\(tcti)' (a copy from another machine, or this TPM was cleared); run `dpctl recover` with the recovery key to bind it to this one", path: path, underlying: e)
    case .authorizationFailed:
        // The fix (try again, or recover) is dpctl's hint for every wrong passphrase; the message adds what the TPM counted.
        let counted = e.lockout.map { " (the TPM counted it: \($0.failures) of \($0.maxFailures) wrong tries before it locks out; it forgets one every \($0.interval) s)" } ?? ""
        return ProtectionError(.wrongPassphrase, "wrong passphrase for the domain at this home\(counted)", path: path, underlying: e)
    case .lockout:
        let when = e.lockout.map { "after \($0.failures) wrong passphrases and refuses every one, even the right one; try again in \($0.interval) s" } ?? "and refuses every passphrase; try again later"
        return ProtectionError(.tpmLockout, "the TPM at '\(tcti)' is in dictionary-attack lockout \(when)", path: path, underlying: e)
    case .malformedBlob:
        return KeybagContents.corrupt("its TPM binding record does not parse: \(e.message)")
    }
}
