//! readv/writev and their positioned forms over one description. A
//! vectored write is one write of the gathered bytes, so it is as atomic
//! as write(2) under the policy; a vectored read is one read scattered.
//! Both handle at most `VECTOR_MAX` bytes per call (a short count beyond),
//! so no call can make the library allocate more.

use super::errno::PResult;
use super::file::OpenFile;

/// Most bytes one vectored call moves.
pub const VECTOR_MAX: usize = 64 << 20;

/// readv (`at` None) or preadv.
pub fn read(file: &OpenFile, bufs: &mut [&mut [u8]], at: Option<u64>) -> PResult<usize> {
    if let [one] = bufs {
        return match at {
            Some(off) => file.pread(one, off),
            None => file.read(one),
        };
    }
    let total = bufs.iter().map(|b| b.len()).sum::<usize>().min(VECTOR_MAX);
    let mut tmp = vec![0u8; total];
    let n = match at {
        Some(off) => file.pread(&mut tmp, off)?,
        None => file.read(&mut tmp)?,
    };
    let mut left = &tmp[..n];
    for b in bufs.iter_mut() {
        let k = b.len().min(left.len());
        b[..k].copy_from_slice(&left[..k]);
        left = &left[k..];
    }
    Ok(n)
}

/// writev (`at` None) or pwritev; `sync` adds RWF_SYNC.
pub fn write(file: &OpenFile, bufs: &[&[u8]], at: Option<u64>, sync: bool) -> PResult<usize> {
    let one = |data: &[u8]| match at {
        Some(off) => file.pwrite(data, off, sync),
        None if sync => file.write_sync(data),
        None => file.write(data),
    };
    if let [single] = bufs {
        return one(single);
    }
    let mut all = Vec::new();
    for b in bufs {
        let k = b.len().min(VECTOR_MAX - all.len());
        all.extend_from_slice(&b[..k]);
    }
    one(&all)
}
