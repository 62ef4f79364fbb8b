// keyring-probe: reports whether this process can use the kernel keyring, as a script can read it.
//
// Runs `Keyring.checkAvailable()` and then a real round trip (add a `user`
// key to the process keyring, read it back, invalidate it), printing one line
// per step: `checkAvailable: ok` or `checkAvailable: <code> errno=<n>: <message>`.
// Exit status: 0 all steps worked, 69 (EX_UNAVAILABLE) a step found the keyring
// refused, 70 another keyring failure, 64 bad usage.
// (Its timing of the wrapper against the raw C calls is Benchmarks/Drivers/dp-keyringbench.)
import KernelKeyring

#if canImport(Glibc)
import Glibc
#endif

guard CommandLine.arguments.count == 1 else {
    print("usage: keyring-probe")
    exit(64)
}

/// Runs each step, prints its outcome, and returns the exit status.
func probe() -> Int32 {
    var status: Int32 = 0
    /// Runs one step; `body` returns nil on success or what went wrong without a KeyringError.
    func report(_ step: String, _ body: () throws(KeyringError) -> String?) {
        do {
            if let problem = try body() {
                print("\(step): \(problem)")
                if status == 0 { status = 70 }
            } else {
                print("\(step): ok")
            }
        } catch {
            print("\(step): \(error.code) errno=\(error.errno): \(error.message)")
            let failure: Int32 = error.code == .unavailable ? 69 : 70
            if status == 0 { status = failure }
        }
    }

    let keyring = Keyring()
    report("checkAvailable") { () throws(KeyringError) in
        try Keyring.checkAvailable()
        return nil
    }
    report("add") { () throws(KeyringError) -> String? in
        var payload = (UInt64.random(in: .min ... .max), UInt64.random(in: .min ... .max))
        let name = "keyring-probe:\(getpid()):\(UInt64.random(in: .min ... .max))"
        let key = try withUnsafeBytes(of: &payload) { (bytes) throws(KeyringError) in
            try keyring.add(
                .user, description: name, payload: bytes, to: .process, permissions: .privateToOwner)
        }
        var back: (UInt64, UInt64) = (0, 0)
        let length = try withUnsafeMutableBytes(of: &back) { (bytes) throws(KeyringError) in
            try keyring.read(key, into: bytes)
        }
        try keyring.invalidate(key)
        return length == 16 && back == payload ? nil : "read back \(length) bytes that differ from the 16 written"
    }
    return status
}

exit(probe())
