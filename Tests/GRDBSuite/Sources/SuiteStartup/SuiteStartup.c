// Installs the protected VFS as the test process's default VFS before any test runs, when GRDB_SUITE_VFS=protected.
// A constructor without priority runs after the Swift runtime registered this image (swiftrt.o's constructor is
// linked first) and after every shared library it depends on started.
#include <stdlib.h>
#include <string.h>
#include "SuiteStartup.h"

extern void grdb_suite_install_protected_vfs(void);

__attribute__((constructor)) static void grdb_suite_start(void) {
    const char *v = getenv("GRDB_SUITE_VFS");
    if (v && strcmp(v, "protected") == 0) grdb_suite_install_protected_vfs();
}
