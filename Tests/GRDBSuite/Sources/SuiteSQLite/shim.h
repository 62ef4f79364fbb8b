// The system SQLite, for the rig's sqlite3_vfs_find / sqlite3_vfs_register (the library's CSQLite is internal to it).
#include <sqlite3.h>
