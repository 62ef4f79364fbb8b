// ProtectionCrypto module: under construction.
