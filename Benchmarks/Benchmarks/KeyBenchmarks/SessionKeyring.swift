// Joins a fresh, anonymous session keyring, so the benchmark's class keys live and die with this process tree.
import BenchmarkSupport

#if canImport(Glibc)
import Glibc
#endif

/// Calls libkeyutils' `keyctl_join_session_keyring(NULL)`.
///
/// The library's `KernelKeyring.Keyring.joinNewSessionKeyring()` does this, but KernelKeyring is
/// not a product of the package, so the benchmark reaches libkeyutils (loaded by the library) by name.
func joinFreshSessionKeyring() {
    typealias Join = @convention(c) (UnsafePointer<CChar>?) -> Int32
    guard let library = dlopen("libkeyutils.so.1", RTLD_NOW), let symbol = dlsym(library, "keyctl_join_session_keyring") else {
        fail("unable to load keyctl_join_session_keyring from libkeyutils.so.1 (apt-get install libkeyutils1)")
    }
    guard unsafeBitCast(symbol, to: Join.self)(nil) >= 0 else {
        fail("unable to join a new session keyring: \(String(cString: strerror(errno)))")
    }
}
