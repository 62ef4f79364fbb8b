// DataProtection is the module a newcomer imports: it re-exports the modules below it, so that `import DataProtection`
// reaches the whole public API (domains, class keys, protected files and handles, containers) as before the split.
// Import a lower module alone to depend on less: DataProtectionKeys (keybag, keys, the live lock), DataProtectionFiles
// (protected files and handles), DataProtectionContainers (app containers).
@_exported import DataProtectionKeys
@_exported import DataProtectionFiles
@_exported import DataProtectionContainers
// The domain's logger and metric objects (`Telemetry`), which `PurgeOptions` and `FileCoordinator` take.
@_exported import DataProtectionTelemetry
