internal import CTSS2
import ProtectionCrypto

/// One ESAPI connection to a TPM through a TCTI, with the storage primary and a salted, encrypting session.
///
/// Everything TPM-side is transient: the primary is re-created from the same template on every connection
/// (deterministic under the owner seed, so the same TPM yields the same primary and another TPM a different
/// one), and `close` flushes every handle this connection loaded, so nothing is left in the TPM even where no
/// resource manager cleans up (swtpm, `/dev/tpm0`).
final class TPMContext {
    let esys: OpaquePointer
    private var tcti: OpaquePointer?
    private var handles: [ESYS_TR] = []
    let tctiName: String

    /// Connects through `tcti` ("device:/dev/tpmrm0", "swtpm:host=127.0.0.1,port=2321", …).
    /// - Throws: `.unavailable` when nothing answers.
    init(tcti: String) throws(TPMError) {
        _ = tss2LoggingQuiet
        tctiName = tcti
        var t: OpaquePointer?
        var rc = Tss2_TctiLdr_Initialize(tcti, &t)
        guard rc == TSS2_RC_SUCCESS, let t else {
            throw TPMError(.unavailable, "no TPM reachable through TCTI '\(tcti)' (\(Self.decode(rc)))")
        }
        var e: OpaquePointer?
        rc = Esys_Initialize(&e, t, nil)
        guard rc == TSS2_RC_SUCCESS, let e else {
            var tt: OpaquePointer? = t
            Tss2_TctiLdr_Finalize(&tt)
            throw TPMError(.unavailable, "no TPM answers through TCTI '\(tcti)' (\(Self.decode(rc)))")
        }
        esys = e
        self.tcti = t
    }

    deinit {
        for h in handles.reversed() { _ = Esys_FlushContext(esys, h) }
        var e: OpaquePointer? = esys
        Esys_Finalize(&e)
        Tss2_TctiLdr_Finalize(&tcti)
    }

    /// Remembers a transient handle so that `deinit` flushes it.
    func track(_ h: ESYS_TR) { handles.append(h) }

    /// Flushes a handle now (an object whose auth value was set: it leaves the TPM, and ESAPI's copy of the auth with it).
    func flush(_ h: ESYS_TR) {
        _ = Esys_FlushContext(esys, h)
        handles.removeAll { $0 == h }
    }

    /// Creates the storage primary: ECC NIST P-256, restricted decryption, AES-128-CFB, under the owner hierarchy (empty auth).
    ///
    /// The template is the TCG's storage root key template (the one systemd-cryptenroll and tpm2-tools use), so the
    /// same TPM always re-creates the same key and nothing needs to be persisted in the TPM.
    /// - Throws: `.refused` when the owner hierarchy has a password or the TPM refuses to create it.
    func primary() throws(TPMError) -> ESYS_TR {
        var pub = TPM2B_PUBLIC()
        pub.publicArea.type = TPM2_ALG_ECC
        pub.publicArea.nameAlg = TPM2_ALG_SHA256
        pub.publicArea.objectAttributes = TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT | TPMA_OBJECT_FIXEDTPM
            | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_NODA
        pub.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES
        pub.publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128
        pub.publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB
        pub.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL
        pub.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256
        pub.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL
        var sensitive = TPM2B_SENSITIVE_CREATE()
        var outside = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var h: ESYS_TR = ESYS_TR(ESYS_TR_NONE)
        let rc = Esys_CreatePrimary(
            esys, ESYS_TR(ESYS_TR_RH_OWNER), ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &sensitive, &pub, &outside,
            &pcrs, &h, nil, nil, nil, nil)
        guard rc == TSS2_RC_SUCCESS else {
            throw TPMError(.refused, "the TPM at '\(tctiName)' refused to create its storage key under the owner hierarchy (\(Self.decode(rc))); if the owner hierarchy has a password, this library cannot use it")
        }
        track(h)
        return h
    }

    /// Starts an HMAC session salted with `primary` that encrypts the first command and response parameter (AES-128-CFB).
    ///
    /// Why: the auth value never crosses the bus (only HMACs over it), the new object's auth value in
    /// `TPM2_Create` and the HMAC result in the response travel encrypted under a salt only the TPM can read.
    func session(salt primary: ESYS_TR) throws(TPMError) -> ESYS_TR {
        var sym = TPMT_SYM_DEF()
        sym.algorithm = TPM2_ALG_AES
        sym.keyBits.aes = 128
        sym.mode.aes = TPM2_ALG_CFB
        var s: ESYS_TR = ESYS_TR(ESYS_TR_NONE)
        var rc = Esys_StartAuthSession(
            esys, primary, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), nil, TPM2_SE_HMAC, &sym,
            TPM2_ALG_SHA256, &s)
        guard rc == TSS2_RC_SUCCESS else { throw TPMError(.refused, "the TPM at '\(tctiName)' refused an authorisation session (\(Self.decode(rc)))") }
        track(s)
        let attributes = TPMA_SESSION(TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_DECRYPT | TPMA_SESSION_ENCRYPT)
        rc = Esys_TRSess_SetAttributes(esys, s, attributes, 0xFF)
        guard rc == TSS2_RC_SUCCESS else { throw TPMError(.refused, "unable to set the session's attributes (\(Self.decode(rc)))") }
        return s
    }

    /// Sets `h`'s auth value to `auth` (ESAPI keeps a copy until the object is flushed; the stack copy is wiped here).
    func setAuth(_ h: ESYS_TR, _ auth: borrowing SecretBytes) throws(TPMError) {
        var value = TPM2B_AUTH()
        defer { withUnsafeMutableBytes(of: &value) { wipeMemory($0) } }
        try fill(&value, auth)
        let rc = Esys_TR_SetAuth(esys, h, &value)
        guard rc == TSS2_RC_SUCCESS else { throw TPMError(.refused, "unable to set an auth value (\(Self.decode(rc)))") }
    }

    /// Overwrites ESAPI's copy of `h`'s auth value with zeros (before a flush, which frees it unwiped).
    func clearAuth(_ h: ESYS_TR) {
        var zeros = TPM2B_AUTH()
        zeros.size = UInt16(MemoryLayout.size(ofValue: zeros.buffer))
        _ = Esys_TR_SetAuth(esys, h, &zeros)
    }

    /// Overwrites the session value ESAPI keeps in `session` (its session key followed by the auth value of the
    /// object it last authorised, freed unwiped at the flush) with a non-secret value of the same length.
    ///
    /// How: one command authorised through `session` for `primary` with a 32-byte auth value of 0xFF, which the TPM
    /// refuses (the primary's auth is empty) without counting it: the primary is noDA, so no dictionary-attack failure.
    func overwriteSessionValue(_ session: ESYS_TR, primary: ESYS_TR) {
        var filler = TPM2B_AUTH()
        filler.size = 32
        withUnsafeMutableBytes(of: &filler.buffer) { _ = $0.initializeMemory(as: UInt8.self, repeating: 0xFF) }
        guard Esys_TR_SetAuth(esys, primary, &filler) == TSS2_RC_SUCCESS else { return }
        var buffer = TPM2B_MAX_BUFFER()
        var out: UnsafeMutablePointer<TPM2B_DIGEST>?
        _ = Esys_HMAC(esys, primary, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &buffer, TPM2_ALG_SHA256, &out)
        if let out { Esys_Free(out) }
        _ = Esys_TR_SetAuth(esys, primary, nil)
    }

    /// Overwrites ESAPI's copy of the last `Esys_Create`'s sensitive part (the new key's auth value), which it keeps in
    /// its context and frees unwiped, with zeros; the session value and the command buffer are overwritten with it.
    ///
    /// How: a second create with an all-zero sensitive part, authorised through `session` for `primary` with a 32-byte
    /// auth value of 0xFF. ESAPI stores its inputs before it sends them, and the TPM refuses the command (the primary's
    /// auth is empty) without counting it: the primary is noDA, so no dictionary-attack failure and no key is made.
    func overwriteCreateInput(_ session: ESYS_TR, primary: ESYS_TR, public pub: TPM2B_PUBLIC) {
        var filler = TPM2B_AUTH()
        filler.size = 32
        withUnsafeMutableBytes(of: &filler.buffer) { _ = $0.initializeMemory(as: UInt8.self, repeating: 0xFF) }
        guard Esys_TR_SetAuth(esys, primary, &filler) == TSS2_RC_SUCCESS else { return }
        var zeros = TPM2B_SENSITIVE_CREATE()
        var template = pub
        var outside = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        _ = Esys_Create(
            esys, primary, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &zeros, &template, &outside, &pcrs, &outPrivate, &outPublic,
            nil, nil, nil)
        if let outPrivate { Esys_Free(outPrivate) }
        if let outPublic { Esys_Free(outPublic) }
        _ = Esys_TR_SetAuth(esys, primary, nil)
    }

    /// Overwrites the command/response buffer ESAPI keeps (and frees unwiped) with a hash of zeros: the last
    /// response's parameters (an HMAC, decrypted there in place) are gone from it.
    func overwriteResponseBuffer() {
        var data = TPM2B_MAX_BUFFER()
        data.size = 256
        var digest: UnsafeMutablePointer<TPM2B_DIGEST>?
        var ticket: UnsafeMutablePointer<TPMT_TK_HASHCHECK>?
        _ = Esys_Hash(esys, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &data, TPM2_ALG_SHA256, ESYS_TR(ESYS_TR_RH_NULL), &digest, &ticket)
        if let digest { Esys_Free(digest) }
        if let ticket { Esys_Free(ticket) }
    }

    /// The TPM's dictionary-attack counters.
    func lockoutState() throws(TPMError) -> LockoutState {
        var more: TPMI_YES_NO = 0
        var data: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?
        let rc = Esys_GetCapability(
            esys, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), TPM2_CAP_TPM_PROPERTIES, PT.lockoutCounter, 4, &more, &data)
        guard rc == TSS2_RC_SUCCESS, let data else { throw TPMError(.refused, "unable to read the TPM's lockout state (\(Self.decode(rc)))") }
        defer { Esys_Free(data) }
        var values: [TPM2_PT: UInt32] = [:]
        let list = data.pointee.data.tpmProperties
        withUnsafeBytes(of: list.tpmProperty) { raw in
            let props = raw.bindMemory(to: TPMS_TAGGED_PROPERTY.self)
            for i in 0..<min(Int(list.count), props.count) { values[props[i].property] = props[i].value }
        }
        return LockoutState(
            failures: values[PT.lockoutCounter] ?? 0, maxFailures: values[PT.maxAuthFail] ?? 0,
            interval: values[PT.lockoutInterval] ?? 0, lockoutRecovery: values[PT.lockoutRecovery] ?? 0)
    }

    /// "TPM_RC_AUTH_FAIL"-style text for a response code (tss2-rc's decoder).
    static func decode(_ rc: TSS2_RC) -> String {
        guard let s = Tss2_RC_Decode(rc) else { return "0x\(String(rc, radix: 16))" }
        return "\(String(cString: s)), 0x\(String(rc, radix: 16))"
    }

    /// The TPM 2.0 response code without its handle, parameter or session number (nil for a TSS-layer code).
    static func base(_ rc: TSS2_RC) -> UInt32? {
        guard rc & 0xFF_0000 == 0 else { return nil }
        return rc & 0x80 != 0 ? rc & 0xBF : rc & 0x97F
    }
}

/// Copies `secret` into a TPM2B buffer (size ‖ bytes), as ESAPI takes auth values and sensitive data.
func fill<T>(_ value: inout T, _ secret: borrowing SecretBytes) throws(TPMError) {
    let ok = withUnsafeMutableBytes(of: &value) { raw in
        secret.withUnsafeBytes { s -> Bool in
            guard s.count + 2 <= raw.count, s.count <= 64 else { return false }
            raw.storeBytes(of: UInt16(s.count), toByteOffset: 0, as: UInt16.self)
            raw.baseAddress!.advanced(by: 2).copyMemory(from: s.baseAddress!, byteCount: s.count)
            return true
        }
    }
    guard ok else { throw TPMError(.refused, "an auth value of \(secret.count) bytes does not fit a TPM2B_AUTH") }
}

/// TPM 2.0 property tags of the dictionary-attack state (tss2 defines them as compound macros Swift cannot import).
enum PT {
    static let lockoutCounter: TPM2_PT = 0x200 + 14, maxAuthFail: TPM2_PT = 0x200 + 15, lockoutInterval: TPM2_PT = 0x200 + 16,
        lockoutRecovery: TPM2_PT = 0x200 + 17
}

/// TPM 2.0 response codes without their handle, session or parameter number (Part 2, 6.6; compound macros in tss2).
enum RC {
    /// Format-1 codes.
    static let value: UInt32 = 0x084, size: UInt32 = 0x095, key: UInt32 = 0x09C, integrity: UInt32 = 0x09F, binding: UInt32 = 0x0A5
    /// The auth check failed and the DA counter was incremented / failed without DA implications.
    static let authFail: UInt32 = 0x08E, badAuth: UInt32 = 0x0A2
    /// The TPM is in DA lockout.
    static let lockout: UInt32 = 0x921
}
