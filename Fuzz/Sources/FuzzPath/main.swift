// libFuzzer target: container path resolution. Each input builds a tree of directories and
// symbolic and hard links beneath a root, then resolves, opens, creates, renames and removes
// paths through Confinement; a descriptor outside the root, or any change outside it, is a
// finding (not just a crash). See PathHarness.swift for the input language.
import CFuzz
import FuzzHarnesses

#if canImport(Glibc)
import Glibc
#endif

nonisolated(unsafe) let harness = PathFuzzHarness()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPath(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if let finding = harness.run(Array(UnsafeBufferPointer(start: data, count: size))) {
        harness.remove()
        preconditionFailure(finding)
    }
    return 0
}

/// SwiftPM links executables with `main` aliased to `FuzzPath_main`; hand control to libFuzzer.
@_cdecl("FuzzPath_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    // libFuzzer leaves through exit(); remove the temporary tree then.
    atexit { harness.remove() }
    var c = argc
    var v = argv
    return LLVMFuzzerRunDriver(&c, &v) { data, size in fuzzPath(data!, size) }
}
