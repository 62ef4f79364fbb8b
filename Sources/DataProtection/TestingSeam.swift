// The file-system seam's vocabulary, as testing SPI: rigs in another package (Tests/Support, Fuzz) implement `FileIO`
// to inject faults or hold files in memory and pass it to the `io:` initialisers, which are testing SPI too. Clients
// see none of this without `@_spi(Testing) import DataProtection`; SystemLayer itself is no product.
import SystemLayer

/// Test hook: the file-system calls the library makes, for a rig to wrap or replace (fault injection, power loss, fuzzing).
@_spi(Testing) public typealias FileIO = SystemLayer.FileIO
/// Test hook: the real system calls, for a rig's `FileIO` to forward to.
@_spi(Testing) public typealias SystemFileIO = SystemLayer.SystemFileIO
/// Test hook: the errno a `FileIO` call throws (swift-system's `Errno`).
@_spi(Testing) public typealias SystemError = SystemLayer.SystemError
