// The system SQLite (libsqlite3-dev) for dp-sqlbench: plain SQLite (the default VFS) and the library's protected VFS
// in one process. The library's CSQLite is internal to it; this module is the benchmark package's, with its own name.
#include <sqlite3.h>
