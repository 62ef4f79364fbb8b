import DataProtectionTelemetry

// The telemetry's per-class metric objects, indexed by ProtectionClass (DataProtectionTelemetry knows raw values only).
extension PerClass {
    /// The object of class `c`; `unknown` for nil (a file whose header did not parse).
    @inlinable public subscript(_ c: ProtectionClass?) -> M { self[raw: c?.rawValue] }
}
