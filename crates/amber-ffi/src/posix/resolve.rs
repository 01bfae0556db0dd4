//! Path resolution as the kernel does it, over the core's lookups:
//! symlinks followed component by component (at most 40, ELOOP), ".."
//! through the directory's own entry, a trailing slash meaning "a
//! directory". For the interposer the pool sits at a mount directory, so a
//! path can also leave it — ".." above the pool's root, or a symlink to an
//! absolute path elsewhere — and then resolution hands the kernel the
//! path it reached. The C library has no mount directory: there ".." of
//! the root is the root and absolute symlinks start at the pool's root.

use std::collections::VecDeque;

use amber_core::{Core, FsError};
use amber_format::{FileKind, ROOT_INO};

use super::errno::{Errno, PResult};
use super::pool::Dev;

/// Most symlinks followed in one resolution (Linux's limit).
const MAX_SYMLINKS: usize = 40;
/// Longest path accepted (PATH_MAX).
pub const PATH_MAX: usize = 4096;

/// Where a path inside the pool led.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The directory holding the last component.
    pub parent: u64,
    /// The last component; empty when the path names a directory it
    /// reached without one (the root, ".", "..").
    pub name: Vec<u8>,
    /// The inode the path names, if it exists.
    pub ino: Option<u64>,
    /// The path ended with '/': it must name a directory.
    pub dir_only: bool,
}

impl Found {
    /// The inode named, or ENOENT.
    pub fn existing(&self) -> PResult<u64> {
        self.ino.ok_or(Errno(libc::ENOENT))
    }

    /// The name to create or remove; EEXIST-like paths without one (the
    /// root, ".") are refused with `errno`.
    pub fn entry(&self, errno: i32) -> PResult<&[u8]> {
        if self.name.is_empty() {
            Err(Errno(errno))
        } else {
            Ok(&self.name)
        }
    }
}

/// Where a path leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Pool(Found),
    /// Out of the pool: the path the kernel should resolve.
    Kernel(Vec<u8>),
}

/// The components of `path`, without empty ones and ".".
fn components(path: &[u8]) -> impl DoubleEndedIterator<Item = &[u8]> {
    path.split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
}

/// The part of absolute path `abs` below directory `mount` (both as the
/// process names them), if `abs` lies under it: lexically, "." and ".."
/// and repeated slashes undone until the mount directory is reached.
/// Returns the rest as pool-relative components joined by '/'; empty for
/// the mount directory itself.
pub fn under_mount(mount: &[u8], abs: &[u8]) -> Option<Vec<u8>> {
    if !abs.starts_with(b"/") {
        return None;
    }
    // The common cases, on every path call: the mount directory spelled
    // out (what follows is the pool's to resolve, ".." included), or a
    // literal path elsewhere.
    let rest = if mount == b"/" {
        Some(abs)
    } else {
        abs.strip_prefix(mount)
    };
    if let Some(rest) = rest.filter(|r| r.is_empty() || r.starts_with(b"/") || mount == b"/") {
        return Some(rest.to_vec());
    }
    if is_plain(abs) {
        return None;
    }
    let want: Vec<&[u8]> = components(mount).collect();
    let mut stack: Vec<&[u8]> = Vec::new();
    let mut rest = abs;
    loop {
        if stack == want {
            return Some(rest.to_vec());
        }
        let trimmed = rest.strip_prefix(b"/").map_or(rest, |r| r);
        let trimmed = trimmed
            .iter()
            .position(|&b| b != b'/')
            .map_or(&b""[..], |i| &trimmed[i..]);
        if trimmed.is_empty() {
            return None;
        }
        let end = trimmed
            .iter()
            .position(|&b| b == b'/')
            .unwrap_or(trimmed.len());
        let comp = &trimmed[..end];
        rest = &trimmed[end..];
        match comp {
            b"." => {}
            b".." => {
                stack.pop();
            }
            c => stack.push(c),
        }
    }
}

/// Whether `p` has no "//" and no "/." (so no empty, "." or ".."
/// component after its first): then it names its directories literally.
/// Names that merely start with a dot take the slower, general way. On
/// every path call the interposer does not serve, so it looks at eight
/// bytes at a time.
#[inline]
pub fn is_plain(p: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const SLASH: u64 = ONES * b'/' as u64;
    const DOT: u64 = ONES * b'.' as u64;
    // The high bit of each byte of `x` that is zero, exactly.
    let zeros = |x: u64| !(((x & !(ONES << 7)) + !(ONES << 7)) | x | !(ONES << 7));
    let word = |i: usize| u64::from_le_bytes(p[i..i + 8].try_into().unwrap_or([0; 8]));
    let mut i = 0;
    while i + 9 <= p.len() {
        let (here, next) = (word(i), word(i + 1));
        if zeros(here ^ SLASH) & (zeros(next ^ SLASH) | zeros(next ^ DOT)) != 0 {
            return false;
        }
        i += 8;
    }
    !p[i..]
        .windows(2)
        .any(|w| w[0] == b'/' && (w[1] == b'/' || w[1] == b'.'))
}

/// Resolves paths in one pool.
pub struct Walker<'a> {
    pub core: &'a Core<Dev>,
    /// The mount directory (absolute, as the process names it), for the
    /// interposer; None for the C library.
    pub mount: Option<&'a [u8]>,
}

/// A resolution in progress.
struct Walk {
    todo: VecDeque<Vec<u8>>,
    at: u64,
    symlinks: usize,
}

impl Walk {
    fn push_front(&mut self, path: &[u8]) {
        for c in components(path).rev() {
            self.todo.push_front(c.to_vec());
        }
    }

    /// The remaining components joined after `base`, as a kernel path.
    fn rest_after(&self, base: &[u8]) -> Vec<u8> {
        let mut p = base.to_vec();
        for c in &self.todo {
            if !p.ends_with(b"/") {
                p.push(b'/');
            }
            p.extend_from_slice(c);
        }
        p
    }
}

impl Walker<'_> {
    /// Resolves `path` from directory `start` (an absolute path from the
    /// pool's root). `follow` follows a symlink in the last component.
    pub fn walk(&self, start: u64, path: &[u8], follow: bool) -> PResult<Place> {
        if path.is_empty() {
            return Err(Errno(libc::ENOENT));
        }
        if path.len() >= PATH_MAX {
            return Err(Errno(libc::ENAMETOOLONG));
        }
        let dir_only = path.ends_with(b"/");
        let at = if path.starts_with(b"/") {
            ROOT_INO
        } else {
            start
        };
        let mut w = Walk {
            todo: VecDeque::new(),
            at,
            symlinks: 0,
        };
        w.push_front(path);
        while let Some(comp) = w.todo.pop_front() {
            let last = w.todo.is_empty();
            if comp == b".." {
                if let Some(kernel) = self.up(&mut w)? {
                    return Ok(kernel);
                }
                continue;
            }
            let child = match self.core.lookup(w.at, &comp) {
                Ok(a) => a,
                Err(FsError::NotFound) if last => {
                    let (parent, name, ino) = (w.at, comp, None);
                    return Ok(Place::Pool(Found {
                        parent,
                        name,
                        ino,
                        dir_only,
                    }));
                }
                Err(e) => return Err(e.into()),
            };
            if child.kind == FileKind::Symlink && (!last || follow || dir_only) {
                if let Some(kernel) = self.follow(&mut w, child.ino)? {
                    return Ok(kernel);
                }
                continue;
            }
            if last {
                let found = Found {
                    parent: w.at,
                    name: comp,
                    ino: Some(child.ino),
                    dir_only,
                };
                return Ok(Place::Pool(found));
            }
            if child.kind != FileKind::Directory {
                return Err(Errno(libc::ENOTDIR));
            }
            w.at = child.ino;
        }
        let found = Found {
            parent: w.at,
            name: Vec::new(),
            ino: Some(w.at),
            dir_only,
        };
        Ok(Place::Pool(found))
    }

    /// "..": the parent directory, or out of the pool from its root.
    fn up(&self, w: &mut Walk) -> PResult<Option<Place>> {
        if w.at != ROOT_INO {
            w.at = self.core.lookup(w.at, b"..")?.ino;
            return Ok(None);
        }
        let Some(mount) = self.mount else {
            return Ok(None); // the root's ".." is the root
        };
        let parent = match mount.iter().rposition(|&b| b == b'/') {
            Some(0) | None => b"/".to_vec(),
            Some(i) => mount[..i].to_vec(),
        };
        self.reenter(w, w.rest_after(&parent))
    }

    /// Continues through symlink `ino`.
    fn follow(&self, w: &mut Walk, ino: u64) -> PResult<Option<Place>> {
        w.symlinks += 1;
        if w.symlinks > MAX_SYMLINKS {
            return Err(Errno(libc::ELOOP));
        }
        let target = self.core.readlink(ino)?;
        if !target.starts_with(b"/") {
            w.push_front(&target);
            return Ok(None);
        }
        match self.mount {
            None => {
                w.at = ROOT_INO;
                w.push_front(&target);
                Ok(None)
            }
            Some(_) => self.reenter(w, w.rest_after(&target)),
        }
    }

    /// A kernel path reached from inside: back into the pool if it leads
    /// there again, else the kernel's to resolve.
    fn reenter(&self, w: &mut Walk, kernel: Vec<u8>) -> PResult<Option<Place>> {
        let mount = self.mount.unwrap_or(b"/");
        match under_mount(mount, &kernel) {
            Some(rest) => {
                w.todo.clear();
                w.at = ROOT_INO;
                w.push_front(&rest);
                Ok(None)
            }
            None => Ok(Some(Place::Kernel(kernel))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_under_the_mount_lexically() {
        let m = b"/mnt/amber";
        assert_eq!(under_mount(m, b"/mnt/amber"), Some(b"".to_vec()));
        assert_eq!(under_mount(m, b"/mnt/amber/"), Some(b"/".to_vec()));
        assert_eq!(under_mount(m, b"/mnt/amber/a/b"), Some(b"/a/b".to_vec()));
        assert_eq!(under_mount(m, b"//mnt/./amber//a"), Some(b"//a".to_vec()));
        assert_eq!(under_mount(m, b"/mnt/x/../amber/a"), Some(b"/a".to_vec()));
        assert_eq!(under_mount(m, b"/mnt/amberx/a"), None);
        assert_eq!(under_mount(m, b"/mnt"), None);
        assert_eq!(under_mount(m, b"/etc/passwd"), None);
        assert_eq!(under_mount(m, b"relative"), None);
        // ".." inside the pool is the pool's to resolve.
        assert_eq!(under_mount(m, b"/mnt/amber/../x"), Some(b"/../x".to_vec()));
        assert_eq!(under_mount(b"/", b"/a"), Some(b"/a".to_vec()));
        assert_eq!(under_mount(m, b"/mnt/amber/a/"), Some(b"/a/".to_vec()));
        assert_eq!(under_mount(m, b"/mnt/amber/a/."), Some(b"/a/.".to_vec()));
    }

    #[test]
    fn plain_paths_word_by_word() {
        for (p, plain) in [
            (&b"/usr/lib/x86_64-linux-gnu/libc.so.6"[..], true),
            (b"/usr/lib/x86_64-linux-gnu/libc", true),
            (b"/a", true),
            (b"/", true),
            (b"/home/user/project/src", true),
            (b"/home/user/project//src", false),
            (b"/home/user/project/./src", false),
            (b"/home/user/project/../src", false),
            (b"/home/user/project/.", false),
            (b"/home/user/.cache", false),
            (b"/12345678/", true),
            (b"/1234567//", false),
            (b"/123456/./x", false),
        ] {
            assert_eq!(is_plain(p), plain, "{}", String::from_utf8_lossy(p));
            let naive = !p
                .windows(2)
                .any(|w| w[0] == b'/' && (w[1] == b'/' || w[1] == b'.'));
            assert_eq!(is_plain(p), naive);
        }
        // Random paths of '/', '.' and 'a' against the byte-by-byte rule.
        let seed: u64 = std::env::var("AMBERFS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(16);
        println!("plain_paths_word_by_word: seed {seed} (AMBERFS_SEED replays)");
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for _ in 0..20_000 {
            let mut p = vec![b'/'];
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for k in 0..(x % 40) {
                p.push(b"/.aaaa"[((x >> (k % 60)) % 6) as usize]);
            }
            let naive = !p
                .windows(2)
                .any(|w| w[0] == b'/' && (w[1] == b'/' || w[1] == b'.'));
            assert_eq!(
                is_plain(&p),
                naive,
                "{} (seed {seed})",
                String::from_utf8_lossy(&p)
            );
        }
    }
}
