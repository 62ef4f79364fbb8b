import DataProtectionKeys
import DataProtectionFiles
import SystemLayer
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif

/// A container's sealed bundle for resource look-ups: each resource is checked against the seal when it is looked up.
///
/// The seal's signature is verified once, when the bundle is opened; a resource is then found only if the seal lists
/// it (so `..`, absolute paths and unsealed files never match), and is returned only after its bytes, size and mode
/// match the seal, read through a descriptor opened without following links and without blocking (a symbolic link
/// or FIFO planted in its place is refused, never followed or waited on). The bundle is read-only (files 0444,
/// directories 0555), so what was verified stays what a later open reads unless the owner or root changes it.
public final class SealedBundle: Sendable {
    /// The absolute path of the bundle directory (`<container>/Bundle`).
    public let path: String
    /// The verified seal.
    public let manifest: BundleManifest
    let confinement: Confinement

    /// Opens the bundle of `container`, verifying its seal's signature (against `container.trustedBundleKey` when set).
    /// - Throws: `.bundleTampered` for a missing, malformed or foreign seal; `.io`.
    public init(_ container: Container) throws(ProtectionError) {
        confinement = container.confinement
        manifest = try BundleSeal.readSeal(confinement, trusting: container.trustedBundleKey)
        path = container.path(for: .bundle)
    }

    /// The sealed files' paths relative to the bundle, sorted.
    public var resourcePaths: [String] { manifest.entries.filter { !$0.isDirectory }.map(\.path) }

    /// The absolute path of the sealed file at `relativePath`, after checking it against the seal.
    /// - Throws: `.notFound` when the seal lists no such file; `.bundleTampered` when it differs from the seal or a
    ///   link, FIFO or other special file stands in its place; `.io`.
    public func verifiedPath(of relativePath: String) throws(ProtectionError) -> String {
        let c = confinement
        guard let want = manifest.entries.first(where: { $0.path == relativePath && !$0.isDirectory }) else {
            throw ProtectionError(.notFound, "unable to find the resource '\(relativePath)' in the bundle '\(path)': its seal lists no such file; add it to the bundle and seal it again (`dpctl bundle seal`)", path: path + "/" + relativePath)
        }
        let inContainer = BundleSeal.bundlePath(relativePath)
        let fd: Int32
        do throws(SystemError) {
            // O_NONBLOCK: a FIFO planted at the name must not block the open; it is refused below by fstat.
            fd = try c.open(inContainer, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK, noSymlinks: true)
        } catch {
            switch error.errno {
            case ENOENT: throw BundleSeal.tampered(c, "lacks '\(relativePath)'")
            case ELOOP: throw BundleSeal.tampered(c, "has a symbolic link at '\(relativePath)'")
            case EMLINK: throw BundleSeal.tampered(c, "has '\(relativePath)' hard-linked to another file")
            default: throw c.failure(error.errno, "open the bundle resource", inContainer)
            }
        }
        defer { c.io.close(fd) }
        let st: stat
        do throws(SystemError) { st = try c.io.fullStatus(fd) } catch { throw c.failure(error.errno, "read the bundle resource", inContainer) }
        guard st.st_mode & S_IFMT == S_IFREG else { throw BundleSeal.tampered(c, "has a special file (not a regular file) at '\(relativePath)'") }
        if UInt32(st.st_mode & 0o7777) != want.mode {
            throw BundleSeal.tampered(c, "has '\(relativePath)' with mode \(String(st.st_mode & 0o7777, radix: 8)) instead of \(String(want.mode, radix: 8))")
        }
        guard Int64(st.st_size) == want.size else { throw BundleSeal.tampered(c, "has a modified '\(relativePath)'") }
        let hash: [UInt8]
        do throws(SystemError) { hash = try BundleSeal.hash(c, fd) } catch { throw c.failure(error.errno, "read the bundle resource", inContainer) }
        guard hash == want.hash else { throw BundleSeal.tampered(c, "has a modified '\(relativePath)'") }
        return path + "/" + relativePath
    }
}
