// DataProtection module: under construction.
