"""libamberfs from Python through ctypes: make a pool, write and read a
file, list a directory, set an extended attribute, remount, read back.

    python3 example.py target/release/libamberfs.so /dev/shm/ex.pool
"""
import ctypes
import os
import sys

lib_path, pool = sys.argv[1], sys.argv[2]
lib = ctypes.CDLL(lib_path, use_errno=True)
c_ssize = ctypes.c_ssize_t
lib.amberfs_mount.restype = ctypes.c_void_p
lib.amberfs_mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]
lib.amberfs_unmount.argtypes = [ctypes.c_void_p]
lib.amberfs_mkfs.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_char_p]
lib.amberfs_last_error.restype = ctypes.c_char_p
lib.amberfs_open.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint]
lib.amberfs_close.argtypes = [ctypes.c_void_p, ctypes.c_int]
for name in ("amberfs_write", "amberfs_read"):
    getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    getattr(lib, name).restype = c_ssize
lib.amberfs_pread.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64]
lib.amberfs_pread.restype = c_ssize
lib.amberfs_fsync.argtypes = [ctypes.c_void_p, ctypes.c_int]
lib.amberfs_mkdir.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint]
lib.amberfs_setxattr.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                 ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
lib.amberfs_getxattr.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                 ctypes.c_void_p, ctypes.c_size_t]
lib.amberfs_getxattr.restype = c_ssize
lib.amberfs_opendir.restype = ctypes.c_void_p
lib.amberfs_opendir.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
lib.amberfs_closedir.argtypes = [ctypes.c_void_p]


class Dirent(ctypes.Structure):
    _fields_ = [("ino", ctypes.c_uint64), ("kind", ctypes.c_uint8), ("name", ctypes.c_char * 256)]


lib.amberfs_readdir.argtypes = [ctypes.c_void_p, ctypes.POINTER(Dirent)]


def check(ok, what):
    if not ok:
        err = ctypes.get_errno()
        sys.exit(f"{what} failed: errno {err} ({os.strerror(err)})")


def mount():
    fs = lib.amberfs_mount(pool.encode(), None, None)
    check(fs, "amberfs_mount: " + lib.amberfs_last_error().decode())
    return fs


check(lib.amberfs_mkfs(pool.encode(), 64 << 20, None) == 0, "amberfs_mkfs")
fs = mount()
check(lib.amberfs_mkdir(fs, b"/py", 0o755) == 0, "mkdir")
fd = lib.amberfs_open(fs, b"/py/data.bin", os.O_CREAT | os.O_RDWR, 0o644)
check(fd >= 0, "open")
payload = bytes(range(256)) * 64
check(lib.amberfs_write(fs, fd, payload, len(payload)) == len(payload), "write")
check(lib.amberfs_fsync(fs, fd) == 0, "fsync")
check(lib.amberfs_close(fs, fd) == 0, "close")
check(lib.amberfs_setxattr(fs, b"/py/data.bin", b"user.origin", b"python", 6, 0) == 0, "setxattr")
missing = lib.amberfs_open(fs, b"/py/none", os.O_RDONLY, 0)
check(missing == -1 and ctypes.get_errno() == 2, "ENOENT for a missing file")
check(lib.amberfs_unmount(fs) == 0, "unmount")

fs = mount()
fd = lib.amberfs_open(fs, b"/py/data.bin", os.O_RDONLY, 0)
check(fd >= 0, "reopen")
back = ctypes.create_string_buffer(len(payload))
check(lib.amberfs_pread(fs, fd, back, len(payload), 0) == len(payload), "pread")
check(back.raw == payload, "the bytes read back")
check(lib.amberfs_close(fs, fd) == 0, "close")
value = ctypes.create_string_buffer(16)
check(lib.amberfs_getxattr(fs, b"/py/data.bin", b"user.origin", value, 16) == 6, "getxattr")
check(value.value == b"python", "the attribute read back")
d = lib.amberfs_opendir(fs, b"/py")
check(d, "opendir")
names, e = [], Dirent()
while lib.amberfs_readdir(d, ctypes.byref(e)) == 1:
    names.append(e.name.decode())
check(lib.amberfs_closedir(d) == 0, "closedir")
check(sorted(names) == [".", "..", "data.bin"], f"listing {names}")
check(lib.amberfs_unmount(fs) == 0, "unmount")
print("example.py: ok")
