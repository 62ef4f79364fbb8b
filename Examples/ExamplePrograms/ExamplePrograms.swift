// The example executables, by product name, for tests that run them (found with TestSupport's `builtProduct`).

/// The product names of the examples that this library's dependents get built next to their tests.
public enum ExamplePrograms {
    /// The long-running service that embeds the library as an app would (Examples/BackgroundService).
    public static let service = "dp-example-service"
    /// The main job's tour of the library (Examples/LibraryTour).
    public static let libraryTour = "library-tour"
    /// A service where seccomp refuses the kernel keyring, choosing its key store (Examples/ContainerService).
    public static let containerExample = "dp-container-example"
}
