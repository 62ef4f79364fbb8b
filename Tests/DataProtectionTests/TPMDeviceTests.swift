// TPMBinding against a real software TPM (swtpm): an HMAC key usable only with its auth value, only in the TPM that
// made it, and whose wrong auth values the TPM counts and locks out.
import Foundation
import ProtectionCrypto
import TestSupport
import TPMBinding
import XCTest

final class TPMDeviceTests: XCTestCase {
    let message = Array("dp-tpm-hmac-v1 test".utf8)

    func testTheKeyComputesTheSameHMACEachTimeAndOnlyWithItsAuthValue() throws {
        let tpm = try SoftwareTPM()
        let device = TPM2Device(tcti: tpm.tcti)
        try device.probe()
        let key = try device.createHMACKey(auth: try SecretBytes(utf8: "auth-1"))
        let a = try device.hmac(key, auth: try SecretBytes(utf8: "auth-1"), message: message)
        let b = try device.hmac(key, auth: try SecretBytes(utf8: "auth-1"), message: message)
        XCTAssertEqual(a.count, 32)
        XCTAssertTrue(a.constantTimeEquals(b), "a TPM HMAC key is deterministic")
        let other = try device.hmac(key, auth: try SecretBytes(utf8: "auth-1"), message: message + [0])
        XCTAssertFalse(a.constantTimeEquals(other))
        let e = tpmError { _ = try device.hmac(key, auth: try SecretBytes(utf8: "auth-2"), message: message) }
        XCTAssertEqual(e?.code, .authorizationFailed, "\(String(describing: e))")
        XCTAssertEqual(e?.lockout?.failures, 1, "the TPM counted the failure")
        print("tpm key: public \(key.public.count) bytes, private \(key.private.count) bytes")
    }

    func testAnotherTPMCannotLoadTheKey() throws {
        let first = try SoftwareTPM(), second = try SoftwareTPM()
        let key = try TPM2Device(tcti: first.tcti).createHMACKey(auth: try SecretBytes(utf8: "auth"))
        let e = tpmError { _ = try TPM2Device(tcti: second.tcti).hmac(key, auth: try SecretBytes(utf8: "auth"), message: message) }
        XCTAssertEqual(e?.code, .wrongTPM, "\(String(describing: e))")
        XCTAssertEqual(try TPM2Device(tcti: second.tcti).lockoutState().failures, 0, "a key that does not load costs no DA failure")
    }

    func testNoTPMIsUnavailable() throws {
        let e = tpmError { try TPM2Device(tcti: "device:/nonexistent/tpmrm0").probe() }
        XCTAssertEqual(e?.code, .unavailable, "\(String(describing: e))")
    }

    func testWrongAuthValuesTripTheLockoutWhichLiftsAfterTheInterval() throws {
        let tpm = try SoftwareTPM()
        try tpm.setDictionaryAttack(maxTries: 3, recoveryTime: 2)
        let device = TPM2Device(tcti: tpm.tcti)
        let key = try device.createHMACKey(auth: try SecretBytes(utf8: "right"))
        var codes: [TPMError.Code] = []
        for _ in 0..<4 {
            do { _ = try device.hmac(key, auth: try SecretBytes(utf8: "wrong"), message: message) } catch let e as TPMError { codes.append(e.code) }
        }
        XCTAssertEqual(codes, [.authorizationFailed, .authorizationFailed, .authorizationFailed, .lockout])
        let e = tpmError { _ = try device.hmac(key, auth: try SecretBytes(utf8: "right"), message: message) }
        XCTAssertEqual(e?.code, .lockout, "even the right auth value is refused in lockout")
        XCTAssertEqual(e?.lockout?.interval, 2)
        let start = Date()
        var worked = false
        while !worked, Date().timeIntervalSince(start) < 10 {
            do {
                _ = try device.hmac(key, auth: try SecretBytes(utf8: "right"), message: message)
                worked = true
            } catch let e as TPMError where e.code == .lockout { usleep(250_000) }
        }
        XCTAssertTrue(worked, "the right auth value works once the lockout interval has passed")
        print("tpm lockout: lifted after \(String(format: "%.1f", Date().timeIntervalSince(start))) s (interval 2 s)")
    }
}

/// The `TPMError` `body` throws (nil when it succeeds or throws something else).
func tpmError(_ body: () throws -> Void) -> TPMError? {
    do { try body() } catch let e as TPMError { return e } catch { return nil }
    return nil
}
