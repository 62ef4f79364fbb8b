// KernelKeyring module: under construction.
