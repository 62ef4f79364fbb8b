// libFuzzer target: the keybag file parser, then (with the checksum and MAC repaired under a
// fixed device secret) authentication and unwrapping of every entry. See KeybagHarness.swift.
import CFuzz
import FuzzHarnesses
import FuzzSupport

#if canImport(Glibc)
import Glibc
#endif

nonisolated(unsafe) let harness = try! KeybagFuzzHarness()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKeybag(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if let finding = harness.run(Array(UnsafeBufferPointer(start: data, count: size))) { preconditionFailure(finding) }
    return 0
}

/// SwiftPM links executables with `main` aliased to `FuzzKeybag_main`; hand control to libFuzzer.
@_cdecl("FuzzKeybag_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    // `FuzzKeybag --write-seeds DIR` writes valid keybags (under the harness's fixed secrets) as a seed corpus.
    if argc == 3, let a = argv?[1], String(cString: a) == "--write-seeds", let d = argv?[2] {
        for (i, seed) in (try! harness.seeds()).enumerated() { writeSeed(seed, to: "\(String(cString: d))/seed-\(i).keybag") }
        return 0
    }
    var c = argc
    var v = argv
    return LLVMFuzzerRunDriver(&c, &v) { data, size in fuzzKeybag(data!, size) }
}
