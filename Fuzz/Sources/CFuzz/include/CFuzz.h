// libFuzzer's driver entry point (compiler-rt), for targets whose `main` SwiftPM names.
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
