// unlock-hold HOME DEVICES TCTI
//
// Unlocks a protection domain in this process (the TPM at TCTI for a TPM-bound one) with the passphrase on standard
// input's first line, prints `UNLOCKED`, and stays until standard input closes; its domain answers a `dpctl lock`
// meanwhile. KeyResidueTests read its memory after the lock for the class keys and every TPM-derived secret of the unlock.
import DataProtection
import Foundation
import ProtectionCrypto

let args = CommandLine.arguments
guard args.count == 4 else {
    FileHandle.standardError.write(Data("usage: unlock-hold HOME DEVICES TCTI\n".utf8))
    exit(64)
}
do {
    let domain = try ProtectionDomain.open(
        at: DomainLocation(home: args[1], deviceDirectory: args[2], tpmTCTI: args[3]), keyStore: .kernel(.session))
    // A test rig: the passphrase is a test value, not a needle the scan looks for.
    try domain.unlock(passphrase: try SecretBytes(utf8: readLine() ?? ""))
    print("UNLOCKED")
    fflush(nil)
    while readLine() != nil {}
    withExtendedLifetime(domain) {}
} catch {
    print("FAILED \(error)")
    exit(70)
}
