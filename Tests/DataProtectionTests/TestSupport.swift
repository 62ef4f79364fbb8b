import SystemLayer
import Foundation
import DataProtection
import ProtectionCrypto
import XCTest

/// A fresh directory under `base` (/tmp unless told), removed when the test ends.
func temporaryDirectory(_ test: XCTestCase, _ name: String = #function, under base: String = NSTemporaryDirectory()) throws -> String {
    let dir = base + "dp-\(name.filter { $0.isLetter || $0.isNumber })-\(UUID().uuidString.prefix(8))"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    test.addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
    return dir
}

/// Deterministic pseudo-random bytes for test data (not for keys).
struct TestRNG: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func bytes(_ n: Int) -> [UInt8] { (0..<n).map { _ in UInt8.random(in: 0...255, using: &self) } }
}

/// Asserts `body` throws a `ProtectionError` whose code is in `codes`.
func assertProtectionError(_ codes: Set<ProtectionError.Code>, _ message: String = "", file: StaticString = #filePath, line: UInt = #line, _ body: () throws -> Void) {
    do {
        try body()
        XCTFail("expected one of \(codes), got success. \(message)", file: file, line: line)
    } catch let e as ProtectionError {
        XCTAssertTrue(codes.contains(e.code), "expected one of \(codes), got \(e.code): \(e.message). \(message)", file: file, line: line)
    } catch {
        XCTFail("expected a ProtectionError, got \(error). \(message)", file: file, line: line)
    }
}

func readBytes(_ path: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) }
func writeBytes(_ bytes: [UInt8], _ path: String) throws { try Data(bytes).write(to: URL(fileURLWithPath: path)) }

func hexString(_ b: [UInt8]) -> String { b.map { String(format: "%02x", $0) }.joined() }
func hexBytes(_ s: String) -> [UInt8] {
    var out = [UInt8](), it = Array(s.utf8), i = 0
    func nib(_ c: UInt8) -> UInt8 { c >= 97 ? c - 87 : (c >= 65 ? c - 55 : c - 48) }
    while i + 1 < it.count { out.append(nib(it[i]) << 4 | nib(it[i + 1])); i += 2 }
    return out
}

/// A test `FileIO` that passes every call to the real system calls unless it implements the call itself:
/// a seam states only what it changes.
protocol ForwardingIO: FileIO {}

extension ForwardingIO {
    private var real: SystemFileIO { SystemFileIO() }
    func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 { try real.open(path, flags: flags, mode: mode) }
    func close(_ fd: Int32) { real.close(fd) }
    func pread(_ fd: Int32, into b: UnsafeMutableRawBufferPointer, at o: Int64) throws(SystemError) -> Int { try real.pread(fd, into: b, at: o) }
    func pwrite(_ fd: Int32, from b: UnsafeRawBufferPointer, at o: Int64) throws(SystemError) -> Int { try real.pwrite(fd, from: b, at: o) }
    func fsync(_ fd: Int32) throws(SystemError) { try real.fsync(fd) }
    func ftruncate(_ fd: Int32, to s: Int64) throws(SystemError) { try real.ftruncate(fd, to: s) }
    func size(_ fd: Int32) throws(SystemError) -> Int64 { try real.size(fd) }
    func rename(_ a: String, to b: String) throws(SystemError) { try real.rename(a, to: b) }
    func unlink(_ p: String) throws(SystemError) { try real.unlink(p) }
    func openAt(_ d: Int32, _ n: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 { try real.openAt(d, n, flags: flags, mode: mode) }
    func renameAt(_ d: Int32, _ a: String, to b: String) throws(SystemError) { try real.renameAt(d, a, to: b) }
    func unlinkAt(_ d: Int32, _ n: String) throws(SystemError) { try real.unlinkAt(d, n) }
    func identityAt(_ d: Int32, _ n: String) throws(SystemError) -> (device: UInt64, inode: UInt64) { try real.identityAt(d, n) }
    func copyUserAttributes(at d: Int32, from n: String, to fd: Int32) throws(SystemError) { try real.copyUserAttributes(at: d, from: n, to: fd) }
}

/// The path of the open directory `fd` (from /proc), for test seams that watch names: `directoryPath(fd) + "/" + name`.
func directoryPath(_ fd: Int32) -> String {
    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")) ?? "?"
}
