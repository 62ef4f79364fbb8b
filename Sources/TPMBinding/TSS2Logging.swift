#if canImport(Glibc)
import Glibc
#endif

/// Silences tpm2-tss's own logging in this process, unless the user chose a level with `TSS2_LOG`.
///
/// tpm2-tss 3.x writes WARNING and ERROR lines to standard error for events this module turns into typed errors (a
/// wrong auth value, blobs from another TPM, no TPM at the TCTI), so a program would print them above its own message.
/// Its log level comes from `TSS2_LOG`, read with getenv lazily, once per tss2 module (tcti, esys, sys, mu…), at that
/// module's first log call, and then cached (tss2 3.2.1 src/util/log.c); no API sets it. So `TSS2_LOG=all+NONE`, set
/// before the first TCTI or ESAPI call (`TPMContext.init` reads this first), reaches every module. A value the user
/// set, e.g. `TSS2_LOG=all+debug` to trace the TPM path, is kept (setenv's overwrite flag 0). Processes started
/// afterwards inherit the variable, and so stay quiet too.
///
/// Why setenv is safe here: a Swift global's initialiser runs once, under swift_once; glibc's setenv takes its own
/// lock and never frees an environment array a concurrent getenv may be reading.
let tss2LoggingQuiet: Void = { _ = setenv("TSS2_LOG", "all+NONE", 0) }()
