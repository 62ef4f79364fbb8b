// SQLCipher (Debian libsqlcipher-dev) for dp-sqlbench-cipher. It exports the same sqlite3_* symbols as libsqlite3, so
// it has an executable of its own that links nothing else of SQLite (pkg-config sqlcipher puts its sqlite3.h first).
#include <sqlite3.h>
