// A short tour of the DataProtection library on a throwaway directory:
// protected files in each class, random access, what lock does, and what
// tampering looks like. Run it with `scripts/walkthrough`.
import DataProtection
import Foundation

func say(_ s: String) { print(s) }
func show(_ body: () throws -> String) {
    do { say("   → " + (try body())) } catch let e as ProtectionError { say("   → fails cleanly: \(e.code): \(e.message)") } catch { say("   → \(error)") }
}

let dir = NSTemporaryDirectory() + "dp-tour-\(getpid())"
try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: dir) }

say("1. Class keys. Here they live in this process (InMemoryClassKeys, chosen explicitly);")
say("   a real domain keeps them in the kernel keyring and unlocks them with a passphrase (dpctl).")
let keys = try InMemoryClassKeys.random()
let files = ProtectedFiles(keys: keys)
say("   new files use \(files.options.cipher) in \(files.options.chunkSize / 1024) KiB chunks.")

say("2. One protected file per class, each with its own per-file key wrapped by its class key:")
for c in ProtectionClass.allCases {
    let path = "\(dir)/\(c.name).txt"
    try files.write(Array("hello from class \(c.letter)\n".utf8), to: path, protection: c)
    let info = try files.info(path)
    say("   \(c.letter) \(c.name): \(info.plaintextSize) bytes of plaintext, \(try Data(contentsOf: URL(fileURLWithPath: path)).count) bytes on disk")
}

say("3. Random access on a handle: write in the middle, append, truncate, extend with a hole.")
let h = try files.create("\(dir)/notes.bin", protection: .complete)
try h.write(Array(repeating: 0x41, count: 40_000), at: 0)
try h.write(Array("middle".utf8), at: 20_000)
try h.append(Array("end".utf8))
try h.truncate(to: 50_000)
show { "size \(try h.size); bytes at 20000: \(String(decoding: try h.read(at: 20_000, count: 6), as: UTF8.self))" }
try h.sync()

say("4. Lock: class keys of complete and completeUnlessOpen are dropped.")
keys.lock()
say("   reading a complete file:")
show { String(decoding: try files.read("\(dir)/complete.txt"), as: UTF8.self) }
say("   reading a completeUntilFirstUserAuthentication file (still available):")
show { String(decoding: try files.read("\(dir)/completeUntilFirstUserAuthentication.txt"), as: UTF8.self).trimmingCharacters(in: .newlines) }
say("   creating a completeUnlessOpen file while locked (sealed to the class public key):")
show { try files.write(Array("written while locked".utf8), to: "\(dir)/inbox.txt", protection: .completeUnlessOpen); return "created" }
say("   ...but opening it waits for unlock:")
show { String(decoding: try files.read("\(dir)/inbox.txt"), as: UTF8.self) }
h.close()

say("5. Tampering: flip one bit of a protected file and read it.")
let target = "\(dir)/none.txt"
var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: target)))
bytes[bytes.count - 5] ^= 0x01
try Data(bytes).write(to: URL(fileURLWithPath: target))
show { String(decoding: try files.read(target), as: UTF8.self) }
say("Done; the throwaway directory \(dir) is removed.")
