// unlock-hold HOME DEVICES TCTI [unlock|passwd|recover]
//
// Runs one key operation on a protection domain in this process (the TPM at TCTI for a TPM-bound one) with the
// secrets on standard input's lines, prints what it did, and stays until standard input closes. KeyResidueTests read
// its memory meanwhile for every secret the operation derived (class keys, and the TPM-derived ones of a bound domain):
// - `unlock` (default): line 1 the passphrase; prints `UNLOCKED`; its domain answers a `dpctl lock` meanwhile.
// - `passwd`: line 1 the old passphrase, line 2 the new one; prints `CHANGED` (a bound keybag gets a new TPM key).
// - `recover`: line 1 the recovery key, line 2 the new passphrase; prints `RECOVERED` (a new TPM key here too).
import DataProtection
import Foundation
import ProtectionCrypto

let args = CommandLine.arguments
guard args.count == 4 || args.count == 5 else {
    FileHandle.standardError.write(Data("usage: unlock-hold HOME DEVICES TCTI [unlock|passwd|recover]\n".utf8))
    exit(64)
}
// A test rig: the passphrases and the recovery key are test values, not needles the scan looks for.
func secretLine() throws -> SecretBytes { try SecretBytes(utf8: readLine() ?? "") }
do {
    let location = DomainLocation(home: args[1], deviceDirectory: args[2], tpmTCTI: args[3])
    let domain: ProtectionDomain
    switch args.count == 5 ? args[4] : "unlock" {
    case "unlock":
        domain = try ProtectionDomain.open(at: location, keyStore: .kernel(.session))
        try domain.unlock(passphrase: try secretLine())
        print("UNLOCKED")
    case "passwd":
        domain = try ProtectionDomain.open(at: location, keyStore: .kernel(.session))
        try domain.changePassphrase(old: try secretLine(), new: try secretLine())
        print("CHANGED")
    case "recover":
        let key = try RecoveryKey(text: try secretLine())
        domain = try ProtectionDomain.recover(at: location, recoveryKey: key, newPassphrase: try secretLine(), keyStore: .kernel(.session))
        print("RECOVERED")
    case let other:
        FileHandle.standardError.write(Data("unlock-hold: unknown operation '\(other)'\n".utf8))
        exit(64)
    }
    fflush(nil)
    while readLine() != nil {}
    withExtendedLifetime(domain) {}
} catch {
    print("FAILED \(error)")
    exit(70)
}
