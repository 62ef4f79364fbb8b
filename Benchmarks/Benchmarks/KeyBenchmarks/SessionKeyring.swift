// Joins a fresh, anonymous session keyring, so the benchmark's class keys live and die with this process tree.
import BenchmarkSupport
import KernelKeyring

/// `keyctl session -` for this process: call before any other thread starts (session keyrings are per-thread).
func joinFreshSessionKeyring() {
    do throws(KeyringError) { try Keyring().joinNewSessionKeyring() } catch {
        fail("unable to join a new session keyring: \(error)")
    }
}
