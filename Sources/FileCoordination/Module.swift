// FileCoordination module: under construction.
