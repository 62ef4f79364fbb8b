// The system SQLite (libsqlite3-dev), for DataProtectionSQLite only: its one importer, as ProtectionCrypto is libsodium's.
#include <sqlite3.h>

/// The VFS's file: SQLite's base record, then the Swift object behind it (an unmanaged reference, released by xClose).
typedef struct dp_sqlite3_file {
    sqlite3_file base;
    void *object;
} dp_sqlite3_file;

/// SQLITE_TRANSIENT, which Swift cannot spell (a function pointer cast from -1).
static inline sqlite3_destructor_type dp_sqlite3_transient(void) { return SQLITE_TRANSIENT; }

// SQLite's extended result codes are macros Swift cannot import (an expression each): the ones the VFS returns.
static const int DP_IOERR_CHECKRESERVEDLOCK = SQLITE_IOERR_CHECKRESERVEDLOCK;
/// The protected VFS's own extended code of SQLITE_CORRUPT: a page (or journal or WAL chunk) failed authentication
/// (tampered with), as opposed to SQLite's own corruption findings (SQLITE_CORRUPT and its extended codes 1–3).
static const int DP_CORRUPT_TAMPERED = SQLITE_CORRUPT | (0x44 << 8);
static const int DP_IOERR_DELETE = SQLITE_IOERR_DELETE;
static const int DP_IOERR_DELETE_NOENT = SQLITE_IOERR_DELETE_NOENT;
static const int DP_IOERR_DIR_FSYNC = SQLITE_IOERR_DIR_FSYNC;
static const int DP_IOERR_FSTAT = SQLITE_IOERR_FSTAT;
static const int DP_IOERR_FSYNC = SQLITE_IOERR_FSYNC;
static const int DP_IOERR_LOCK = SQLITE_IOERR_LOCK;
static const int DP_IOERR_NOMEM = SQLITE_IOERR_NOMEM;
static const int DP_IOERR_RDLOCK = SQLITE_IOERR_RDLOCK;
static const int DP_IOERR_READ = SQLITE_IOERR_READ;
static const int DP_IOERR_SHMLOCK = SQLITE_IOERR_SHMLOCK;
static const int DP_IOERR_SHMMAP = SQLITE_IOERR_SHMMAP;
static const int DP_IOERR_SHORT_READ = SQLITE_IOERR_SHORT_READ;
static const int DP_IOERR_TRUNCATE = SQLITE_IOERR_TRUNCATE;
static const int DP_IOERR_WRITE = SQLITE_IOERR_WRITE;

// sqlite3_config is variadic, which Swift cannot call: the calls the page wipe makes (PageWipe.swift), each returning
// SQLITE_MISUSE once SQLite was initialized.
static inline int dp_sqlite3_config_get_pcache2(sqlite3_pcache_methods2 *m) { return sqlite3_config(SQLITE_CONFIG_GETPCACHE2, m); }
static inline int dp_sqlite3_config_pcache2(sqlite3_pcache_methods2 *m) { return sqlite3_config(SQLITE_CONFIG_PCACHE2, m); }
static inline int dp_sqlite3_config_get_malloc(sqlite3_mem_methods *m) { return sqlite3_config(SQLITE_CONFIG_GETMALLOC, m); }
static inline int dp_sqlite3_config_malloc(sqlite3_mem_methods *m) { return sqlite3_config(SQLITE_CONFIG_MALLOC, m); }
/// No bulk page allocation (SQLITE_CONFIG_PAGECACHE with no buffer): every page is its own allocation, so a page the
/// cache lets go is freed through the wiping allocator rather than kept on the cache's private free list.
static inline int dp_sqlite3_config_no_bulk_pages(void) { return sqlite3_config(SQLITE_CONFIG_PAGECACHE, (void *)0, 0, 0); }
