// The calls Swift's Glibc module lacks, from the C shims, as internal `system_*` functions: the other files of this
// module call these, so a file with a public signature never imports CShims (whose C types would leak into it).
internal import CShims

/// `O_PATH` (glibc hides it without `_GNU_SOURCE`).
let system_O_PATH: Int32 = dp_O_PATH
let system_RESOLVE_BENEATH: UInt64 = dp_RESOLVE_BENEATH
let system_RESOLVE_NO_MAGICLINKS: UInt64 = dp_RESOLVE_NO_MAGICLINKS
let system_RESOLVE_NO_SYMLINKS: UInt64 = dp_RESOLVE_NO_SYMLINKS

/// `openat2(2)`; -1 and errno on failure.
func system_openat2(_ directory: Int32, _ path: String, _ flags: UInt64, _ mode: UInt64, _ resolve: UInt64) -> Int32 {
    dp_openat2(directory, path, flags, mode, resolve)
}

/// `renameat2(RENAME_NOREPLACE)`; -1 and errno on failure.
func system_renameat_noreplace(_ directory: Int32, _ name: String, _ newDirectory: Int32, _ newName: String) -> Int32 {
    dp_renameat_noreplace(directory, name, newDirectory, newName)
}

/// `syncfs(2)`.
func system_syncfs(_ fd: Int32) -> Int32 { dp_syncfs(fd) }

/// `statfs(2)`'s `f_type` of `path` into `type`.
func system_statfs_type(_ path: String, _ type: inout Int64) -> Int32 { dp_statfs_type(path, &type) }

/// Sets `O_NOATIME` on `fd`'s open file description; -1 and errno on failure (EPERM: not the file's owner).
func system_set_noatime(_ fd: Int32) -> Int32 { dp_set_noatime(fd) }
