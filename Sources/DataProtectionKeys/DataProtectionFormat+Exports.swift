// The format module's types that are part of DataProtection's own API, re-exported so that code written
// against DataProtection (`catch let e as ProtectionError`, `DomainID(bytes:)`, `ProtectionClass.complete`)
// compiles unchanged. The rest of DataProtectionFormat (headers, keybag and journal encodings) stays out of
// DataProtection's API: import DataProtectionFormat to parse files without keys.
@_exported import struct DataProtectionFormat.ProtectionError
@_exported import enum DataProtectionFormat.ProtectionClass
@_exported import struct DataProtectionFormat.DomainID
