// swift-system's `FileDescriptor` is the descriptor type of DataProtection's API (`ProtectedFiles.write(contentsOf:…)`,
// `ProtectedFiles.read(_:into:)`), re-exported so that `import DataProtection` is enough to call them
// (`FileDescriptor.standardOutput`, `FileDescriptor(rawValue: fd)`); import SystemPackage for the rest of swift-system.
@_exported import struct SystemPackage.FileDescriptor
