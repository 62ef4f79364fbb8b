import SystemLayer

/// The power-loss model's reboot, for crash tests in other packages (PowerLossTests, the crash scenarios): after it,
/// the commit marks of a log written before count as another boot's (FORMAT.md §6.7.6), as after a real power loss.
@_spi(Testing) public enum SimulatedReboot {
    /// Makes this process's boot ID a new, random one.
    public static func now() { BootIdentity.simulateReboot() }
    /// Whether `now()` (or the model's cut) ran in this process.
    public static var happened: Bool { BootIdentity.rebooted }
}
