//! The C ABI called from Rust: thread safety, O_APPEND, O_EXCL,
//! descriptors that are kernel numbers, errno values.

use std::ffi::CString;

use ::amberfs::capi as ffi;
use ffi::*;

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap()
}

struct Mounted(*mut ffi::amberfs, String);
// SAFETY: the C ABI is thread-safe; the handle is used until dropped.
unsafe impl Send for Mounted {}
// SAFETY: as above.
unsafe impl Sync for Mounted {}

fn mounted(name: &str) -> Mounted {
    let p = format!("/dev/shm/ffi-capi-{name}-{}.pool", std::process::id());
    let _ = std::fs::remove_file(&p);
    // SAFETY: valid C strings; the handle is unmounted by the test.
    unsafe {
        assert_eq!(amberfs_mkfs(c(&p).as_ptr(), 64 << 20, std::ptr::null()), 0);
        let fs = amberfs_mount(c(&p).as_ptr(), std::ptr::null(), std::ptr::null());
        assert!(!fs.is_null());
        Mounted(fs, p)
    }
}

fn unmount(m: Mounted) {
    // SAFETY: a live handle, given up here.
    assert_eq!(unsafe { amberfs_unmount(m.0) }, 0);
    std::fs::remove_file(m.1).unwrap();
}

#[test]
fn threads_append_and_write_their_own_ranges() {
    let m = mounted("threads");
    let path = c("/shared");
    let flags = libc::O_CREAT | libc::O_RDWR;
    // SAFETY: a live handle and valid strings and buffers throughout.
    unsafe {
        let fd = amberfs_open(m.0, path.as_ptr(), flags, 0o644);
        let log = amberfs_open(m.0, c("/log").as_ptr(), flags | libc::O_APPEND, 0o644);
        assert!(fd >= 0 && log >= 0);
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let m = &m;
                s.spawn(move || {
                    for i in 0..100u64 {
                        let block = [t; 512];
                        let off = ((t as u64) * 100 + i) * 512;
                        assert_eq!(
                            amberfs_pwrite(m.0, fd, block.as_ptr().cast(), 512, off as i64),
                            512
                        );
                        assert_eq!(amberfs_write(m.0, log, [t; 8].as_ptr().cast(), 8), 8);
                    }
                });
            }
        });
        let mut st: libc::stat = std::mem::zeroed();
        assert_eq!(amberfs_fstat(m.0, log, &mut st), 0);
        assert_eq!(st.st_size, 4 * 100 * 8, "no append overwrote another");
        let mut back = vec![0u8; 400 * 512];
        assert_eq!(
            amberfs_pread(m.0, fd, back.as_mut_ptr().cast(), back.len(), 0),
            back.len() as isize
        );
        for (n, chunk) in back.chunks(512).enumerate() {
            assert!(chunk.iter().all(|&b| b as usize == n / 100));
        }
        assert_eq!(amberfs_close(m.0, fd), 0);
        assert_eq!(amberfs_close(m.0, fd), -1);
        assert_eq!(errno(), libc::EBADF);
        assert_eq!(amberfs_close(m.0, log), 0);
    }
    unmount(m);
}

#[test]
fn posix_errors() {
    let m = mounted("errors");
    // SAFETY: a live handle and valid strings throughout.
    unsafe {
        let f = c("/f");
        let excl = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY;
        let fd = amberfs_open(m.0, f.as_ptr(), excl, 0o600);
        assert!(fd >= 0);
        assert_eq!(amberfs_open(m.0, f.as_ptr(), excl, 0o600), -1);
        assert_eq!(errno(), libc::EEXIST);
        assert_eq!(amberfs_open(m.0, c("/f/x").as_ptr(), libc::O_RDONLY, 0), -1);
        assert_eq!(errno(), libc::ENOTDIR);
        assert_eq!(amberfs_read(m.0, fd, [0u8; 4].as_mut_ptr().cast(), 4), -1);
        assert_eq!(errno(), libc::EBADF, "read of a write-only descriptor");
        assert_eq!(amberfs_mkdir(m.0, c("/d").as_ptr(), 0o755), 0);
        assert_eq!(amberfs_open(m.0, c("/d").as_ptr(), libc::O_WRONLY, 0), -1);
        assert_eq!(errno(), libc::EISDIR);
        assert_eq!(amberfs_rmdir(m.0, c("/").as_ptr()), -1);
        assert_eq!(amberfs_close(m.0, fd), 0);
    }
    unmount(m);
}

/// amberfs_mmap: a shared mapping is the file's own pages (stores seen by
/// amberfs_pread, amberfs_pwrite seen through it), msync makes its stores
/// durable, a private one is a copy, and munmap takes both.
#[test]
fn mapped_files_through_the_c_abi() {
    let m = mounted("mmap");
    // SAFETY: a live handle, valid strings and buffers; the mappings are
    // used only while mapped, inside their length.
    unsafe {
        let flags = libc::O_CREAT | libc::O_RDWR;
        let fd = amberfs_open(m.0, c("/m").as_ptr(), flags, 0o644);
        assert!(fd >= 0);
        assert_eq!(amberfs_ftruncate(m.0, fd, 8192), 0);
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let p = amberfs_mmap(m.0, std::ptr::null_mut(), 8192, rw, libc::MAP_SHARED, fd, 0);
        assert_ne!(p, libc::MAP_FAILED);
        let bytes = p.cast::<u8>();
        bytes.add(100).write_volatile(b'S');
        let mut back = [0u8; 1];
        assert_eq!(amberfs_pread(m.0, fd, back.as_mut_ptr().cast(), 1, 100), 1);
        assert_eq!(back[0], b'S', "a store is seen by pread");
        assert_eq!(amberfs_pwrite(m.0, fd, b"W".as_ptr().cast(), 1, 5000), 1);
        assert_eq!(
            bytes.add(5000).read_volatile(),
            b'W',
            "a pwrite is seen by a load"
        );
        assert_eq!(amberfs_msync(m.0, p, 8192, libc::MS_SYNC), 0);
        let private = amberfs_mmap(
            m.0,
            std::ptr::null_mut(),
            4096,
            rw,
            libc::MAP_PRIVATE,
            fd,
            0,
        );
        assert_ne!(private, libc::MAP_FAILED);
        private.cast::<u8>().add(100).write_volatile(b'P');
        assert_eq!(
            bytes.add(100).read_volatile(),
            b'S',
            "a private copy's store stays there"
        );
        assert_eq!(amberfs_munmap(m.0, private, 4096), 0);
        assert_eq!(amberfs_mprotect(m.0, p, 4096, libc::PROT_READ), 0);
        assert_eq!(amberfs_munmap(m.0, p, 8192), 0);
        let ro = amberfs_open(m.0, c("/m").as_ptr(), libc::O_RDONLY, 0);
        let r = amberfs_mmap(m.0, std::ptr::null_mut(), 4096, rw, libc::MAP_SHARED, ro, 0);
        assert_eq!(r, libc::MAP_FAILED);
        assert_eq!(
            errno(),
            libc::EACCES,
            "PROT_WRITE through a read-only descriptor"
        );
        assert_eq!(amberfs_close(m.0, ro), 0);
        assert_eq!(amberfs_close(m.0, fd), 0);
    }
    unmount(m);
}
