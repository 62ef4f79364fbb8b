#if canImport(Glibc)
import Glibc
#endif

/// Where a process keeps what lives only while processes run (the live lock's and the coordinator's rendezvous).
///
/// One rule for every such directory, so that every process of a user, the
/// library's and the tools', meets at the same place: `$XDG_RUNTIME_DIR/<name>`
/// when that variable names a directory this process may write in (systemd's
/// per-user `/run/user/<uid>`), else `/tmp/<name>-<uid>`. The caller creates the
/// directory private (0700) and checks that it owns it.
package enum RuntimeDirectory {
    /// The runtime directory called `name` for this process's user.
    /// - Parameter xdgRuntimeDir: the value of `XDG_RUNTIME_DIR` to go by (default: this process's).
    package static func path(_ name: String, xdgRuntimeDir: String? = currentXDGRuntimeDir()) -> String {
        if let x = xdgRuntimeDir, !x.isEmpty, SystemFileIO().isWritable(x) { return "\(x)/\(name)" }
        return "/tmp/\(name)-\(getuid())"
    }

    /// `$XDG_RUNTIME_DIR` of this process, if set.
    package static func currentXDGRuntimeDir() -> String? { getenv("XDG_RUNTIME_DIR").map { String(cString: $0) } }
}
