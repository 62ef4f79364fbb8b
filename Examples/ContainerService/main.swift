// dp-container-example STATE-DIR [--key-store auto|kernel|in-process]
//
// How a service embeds the library where a container's seccomp profile refuses the kernel keyring (Docker's default
// profile answers EPERM to add_key, keyctl and request_key). It creates a domain under STATE-DIR, unlocks it, writes
// and reads a `complete` file, locks, shows the read refused, and unlocks again.
//
// - `kernel`: class keys in the kernel keyring (the default elsewhere). Refused by seccomp, it stops with the
//   library's one `.keyringUnavailable` error, which names both fixes.
// - `in-process`: class keys in this process's locked memory (`KeyStore.inProcess`). It works under any seccomp
//   profile, and costs what the kernel store gives: no other process sees this lock or unlock (`dpctl lock` from
//   outside cannot reach it, and no second process can share the unlocked domain), and an unlock lasts only as long
//   as this process.
// - `auto` (default): the kernel store when the kernel allows it, otherwise `in-process`, said on standard output.
//
// README "Running it in a container" shows it; DpctlTests' ContainerExampleTests run it under `keyctl-deny`.
import DataProtection
import Foundation
import ProtectionCrypto

let args = CommandLine.arguments
let choice = args.count == 4 ? args[3] : "auto"
guard args.count == 2 || (args.count == 4 && args[2] == "--key-store"), ["auto", "kernel", "in-process"].contains(choice) else {
    FileHandle.standardError.write(Data("usage: dp-container-example STATE-DIR [--key-store auto|kernel|in-process]\n".utf8))
    exit(64)
}
let state = args[1]

/// A new domain under `state` with class keys in the store `choice` names; `auto` tries the kernel first, which the
/// library refuses with one `.keyringUnavailable` before it writes anything when seccomp blocks the keyring.
func createDomain(_ location: DomainLocation, _ passphrase: borrowing SecretBytes, _ choice: String) throws(ProtectionError) -> ProtectionDomain {
    func create(_ store: KeyStore) throws(ProtectionError) -> ProtectionDomain {
        print("key store: \(store == .inProcess ? "in-process" : "kernel keyring")")
        return try ProtectionDomain.create(at: location, passphrase: passphrase, kdf: .minimumForTests, keyStore: store) { _ in }
    }
    switch choice {
    case "kernel": return try create(.kernel(.session))
    case "in-process": return try create(.inProcess)
    default:
        do throws(ProtectionError) { return try create(.kernel(.session)) } catch where error.code == .keyringUnavailable {
            print("the kernel keyring is refused here; keeping class keys in this process: no lock or unlock from other processes reaches it")
            return try create(.inProcess)
        }
    }
}

do {
    let location = DomainLocation(home: state + "/domain", deviceDirectory: state + "/devices")
    // A test value: a real service reads its passphrase from a secret the orchestrator mounts, never from its source.
    let passphrase = try SecretBytes(utf8: "container example passphrase")
    let domain = try createDomain(location, passphrase, choice)
    try domain.unlock(passphrase: passphrase)
    let note = state + "/note.txt"
    try domain.files.write(Array("kept in a container\n".utf8), to: note, protection: .complete)
    print("wrote \(note): \(String(decoding: try domain.files.read(note), as: UTF8.self).trimmingCharacters(in: .newlines))")
    _ = try domain.lock()
    do {
        _ = try domain.files.read(note)
        print("read after lock: UNEXPECTEDLY ALLOWED")
        exit(1)
    } catch { print("read after lock: refused (\(error.code))") }
    try domain.unlock(passphrase: passphrase)
    print("read after unlock: \(String(decoding: try domain.files.read(note), as: UTF8.self).trimmingCharacters(in: .newlines))")
    _ = try domain.lock()
} catch {
    FileHandle.standardError.write(Data("dp-container-example: \(error)\n".utf8))
    exit(69)
}
