//! The lease protocol's messages on the daemon's socket: a 16-byte header
//! (magic, kind, body length, zero) and a body of little-endian fields.
//! Every length is checked against the bytes there and against a bound
//! before anything is allocated, so a peer that sends garbage gets an
//! error, never a panic or an unbounded buffer.

use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use amber_core::data::{LeasedSlots, SlotRun, MAX_SLOT_RUNS};
use amber_core::Run;

/// The protocol's version; a peer speaking another is refused.
pub const VERSION: u32 = 7;
/// "AMLS", first in every frame.
const MAGIC: u32 = 0x534C_4D41;
const HEADER: usize = 16;
/// A lease covers one window of a file, this many blocks (16 MiB) from
/// a multiple of it: a grant then carries at most this many runs however
/// fragmented the file is, and a client maps only what it reads.
pub const WINDOW_BLOCKS: u64 = 4096;
/// Most runs one grant carries: one per block of its window.
pub const MAX_RUNS: usize = WINDOW_BLOCKS as usize;
/// Most blocks one map lease covers (256 MiB); a longer mapping is the
/// kernel's.
pub const MAX_MAP_BLOCKS: u64 = 1 << 16;
/// Most runs one map lease's grant carries: each is a mapping of its own
/// in the client (Linux allows 65,530 a process by default), so a file
/// more fragmented than this is mapped by the kernel.
pub const MAX_MAP_RUNS: usize = 1 << 14;
/// Most blocks one write lease is granted (`amber_core`'s bound).
pub const MAX_GRANTED: usize = 1024;
/// The largest body: a grant's runs, blocks and slot runs, a map lease's
/// runs, or a path.
const MAX_BODY: usize = 160 + MAX_MAP_RUNS * 24 + MAX_GRANTED * 8 + MAX_SLOT_RUNS * 24;
const _: () = assert!(MAX_MAP_RUNS >= MAX_RUNS);
/// The longest string a message carries (a path, an emulator spec).
const MAX_TEXT: usize = 4096;

/// Why the daemon did not grant a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The file is being changed (a recall is under way): read it
    /// through the kernel this time.
    Busy,
    /// The file cannot be leased: not a regular file, a window past any
    /// file, or the core failed to settle it.
    Unleasable,
    /// This client holds as many leases as it may.
    Limit,
    /// The file's leases were recalled too often lately: another process
    /// is changing it. Read it through the kernel for a while
    /// (`contention::COOL_DOWN`) before asking again.
    Contended,
    /// A write lease only: a preloaded process maps the file `MAP_SHARED`
    /// (`Msg::Maps`), and the kernel, which faults its pages past the end
    /// of file it knows with SIGBUS, must learn every new end from the
    /// daemon. Write it through the kernel for a while before asking
    /// again; read leases are still granted.
    Mapped,
}

/// One message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// Client → daemon, first: the version it speaks.
    Hello { version: u32 },
    /// Daemon → client: the pool to map and how, and the pool file's
    /// identity, which the client checks on the file it opens. One byte
    /// follows, outside any frame, carrying the mount's close counter
    /// (`closes`) as `SCM_RIGHTS`.
    Welcome(Welcome),
    /// Client → daemon: a lease on window `window` of `ino`, please; a
    /// write lease (§17.4) if `write`.
    Ask {
        seq: u64,
        ino: u64,
        window: u64,
        write: bool,
    },
    /// Daemon → client: lease `lease` on `ino`, with the file's view.
    Granted(Grant),
    /// Client → daemon: a map lease (design.md §17.14) on blocks `[first,
    /// first + blocks)` of `ino`, which this process maps `MAP_SHARED`;
    /// one whose holder may store into them if `writable`.
    MapAsk {
        seq: u64,
        ino: u64,
        first: u64,
        blocks: u64,
        writable: bool,
    },
    /// Daemon → client: map lease `lease` on `ino`, and where the asked
    /// blocks below the end of file lie, pinned while the lease holds.
    Mapped {
        seq: u64,
        ino: u64,
        lease: u64,
        runs: Vec<Run>,
    },
    /// Daemon → client: no lease this time.
    Refused { seq: u64, ino: u64, why: Refusal },
    /// Client → daemon: it no longer reads `ino` under `lease`.
    Return { ino: u64, lease: u64 },
    /// Daemon → client: stop reading `ino` under `lease`, then answer.
    Recall { ino: u64, lease: u64 },
    /// Client → daemon: it no longer reads `ino` under `lease`.
    Recalled { ino: u64, lease: u64 },
    /// Client → daemon: this process maps `ino` `MAP_SHARED` (with or
    /// without a map lease), and may until it ends: no write lease on
    /// the file while it lives (`Refusal::Mapped`). `ALL_FILES`: more
    /// files than it tells apart, so none. Answered with `Noted`.
    Maps { seq: u64, ino: u64 },
    /// Daemon → client: `Maps` request `seq` holds from now.
    Noted { seq: u64 },
}

/// `Msg::Maps` of a process that maps more files than it tells apart.
pub const ALL_FILES: u64 = u64::MAX;

/// What a client needs to map the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Welcome {
    pub version: u32,
    /// The pool file's device and inode numbers and its size.
    pub pool_dev: u64,
    pub pool_ino: u64,
    pub pool_size: u64,
    /// The emulator the daemon runs the pool behind (`--emulate`).
    pub emulate: String,
    /// The pool's absolute path.
    pub pool: PathBuf,
}

/// A granted lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub seq: u64,
    pub ino: u64,
    pub window: u64,
    pub lease: u64,
    pub size: u64,
    pub runs: Vec<Run>,
    /// For a write lease, what the client may write with.
    pub writes: Option<Writes>,
}

/// What a write lease lets its holder write (design.md §17.4, §17.11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writes {
    /// The file's generation, which its records and entries carry.
    pub generation: u32,
    /// The first seq its writes may carry, one per write.
    pub seq: u64,
    /// The pool offset of block 0's record.
    pub records: u64,
    /// The pool offset of the file's attribute log (four entries).
    pub log: u64,
    /// Blocks the file mapped when granted.
    pub mapped: u64,
    /// Its block at the highest index then: (file block, block).
    pub head: Option<(u64, u64)>,
    /// The granted blocks (block numbers), at most `MAX_GRANTED`.
    pub blocks: Vec<u64>,
    /// Zone slots for small overwrites, at most `MAX_SLOT_RUNS` runs.
    pub slots: Option<LeasedSlots>,
}

impl Writes {
    /// The lessee's part of the daemon's grant `w`.
    pub fn of(w: &amber_core::WriteLease) -> Writes {
        Writes {
            generation: w.view.generation,
            seq: w.writes.seq,
            records: w.records,
            log: w.log,
            mapped: w.writes.mapped,
            head: w.writes.head,
            blocks: w.writes.blocks.clone(),
            slots: w.writes.slots.clone(),
        }
    }
}

mod kind {
    pub const HELLO: u32 = 1;
    pub const WELCOME: u32 = 2;
    pub const ASK: u32 = 3;
    pub const GRANTED: u32 = 4;
    pub const REFUSED: u32 = 5;
    pub const RETURN: u32 = 6;
    pub const RECALL: u32 = 7;
    pub const RECALLED: u32 = 8;
    pub const MAP_ASK: u32 = 9;
    pub const MAPPED: u32 = 10;
    pub const MAPS: u32 = 11;
    pub const NOTED: u32 = 12;
}

fn bad(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// Writes `msg` as one frame in one write, so frames written under one
/// lock never interleave.
pub fn send(w: &mut impl Write, msg: &Msg) -> io::Result<()> {
    let (kind, body) = encode(msg);
    debug_assert!(body.len() <= MAX_BODY);
    let mut frame = Vec::with_capacity(HEADER + body.len());
    frame.extend_from_slice(&MAGIC.to_le_bytes());
    frame.extend_from_slice(&kind.to_le_bytes());
    frame.extend_from_slice(
        &u32::try_from(body.len())
            .map_err(|_| bad("body"))?
            .to_le_bytes(),
    );
    frame.extend_from_slice(&0u32.to_le_bytes());
    frame.extend_from_slice(&body);
    w.write_all(&frame)
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub fn recv(r: &mut impl Read) -> io::Result<Option<Msg>> {
    let mut h = [0u8; HEADER];
    match r.read_exact(&mut h) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    if word(0) != MAGIC || word(12) != 0 {
        return Err(bad("not a lease frame"));
    }
    let len = word(8) as usize;
    if len > MAX_BODY {
        return Err(bad("a frame longer than any message"));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    decode(word(4), &body).map(Some)
}

fn encode(msg: &Msg) -> (u32, Vec<u8>) {
    let mut b = Body::default();
    let kind = match msg {
        Msg::Hello { version } => {
            b.u32(*version);
            kind::HELLO
        }
        Msg::Welcome(w) => {
            b.u32(w.version);
            b.u64(w.pool_dev);
            b.u64(w.pool_ino);
            b.u64(w.pool_size);
            b.text(w.emulate.as_bytes());
            b.text(w.pool.as_os_str().as_encoded_bytes());
            kind::WELCOME
        }
        Msg::Ask {
            seq,
            ino,
            window,
            write,
        } => {
            b.u64(*seq);
            b.u64(*ino);
            b.u64(*window);
            b.u32(u32::from(*write));
            kind::ASK
        }
        Msg::Granted(g) => {
            encode_grant(&mut b, g);
            kind::GRANTED
        }
        Msg::MapAsk {
            seq,
            ino,
            first,
            blocks,
            writable,
        } => {
            b.u64(*seq);
            b.u64(*ino);
            b.u64(*first);
            b.u64(*blocks);
            b.u32(u32::from(*writable));
            kind::MAP_ASK
        }
        Msg::Mapped {
            seq,
            ino,
            lease,
            runs,
        } => {
            b.u64(*seq);
            b.u64(*ino);
            b.u64(*lease);
            encode_runs(&mut b, runs);
            kind::MAPPED
        }
        Msg::Refused { seq, ino, why } => {
            b.u64(*seq);
            b.u64(*ino);
            b.u32(*why as u32);
            kind::REFUSED
        }
        Msg::Return { ino, lease } => pair(&mut b, kind::RETURN, *ino, *lease),
        Msg::Recall { ino, lease } => pair(&mut b, kind::RECALL, *ino, *lease),
        Msg::Recalled { ino, lease } => pair(&mut b, kind::RECALLED, *ino, *lease),
        Msg::Maps { seq, ino } => pair(&mut b, kind::MAPS, *seq, *ino),
        Msg::Noted { seq } => {
            b.u64(*seq);
            kind::NOTED
        }
    };
    (kind, b.0)
}

/// A message of two `u64`s, in order.
fn pair(b: &mut Body, kind: u32, first: u64, second: u64) -> u32 {
    b.u64(first);
    b.u64(second);
    kind
}

fn encode_grant(b: &mut Body, g: &Grant) {
    b.u64(g.seq);
    b.u64(g.ino);
    b.u64(g.window);
    b.u64(g.lease);
    b.u64(g.size);
    encode_runs(b, &g.runs);
    let Some(w) = &g.writes else {
        b.u32(0);
        return;
    };
    b.u32(1);
    b.u32(w.generation);
    b.u64(w.seq);
    b.u64(w.records);
    b.u64(w.log);
    b.u64(w.mapped);
    let (head_at, head) = w.head.unwrap_or((0, 0));
    b.u64(head_at);
    b.u64(head);
    b.u32(u32::try_from(w.blocks.len()).expect("blocks are bounded by MAX_GRANTED"));
    for &blk in &w.blocks {
        b.u64(blk);
    }
    let Some(z) = &w.slots else {
        b.u32(0);
        return;
    };
    b.u32(u32::try_from(z.runs.len()).expect("slot runs are bounded by MAX_SLOT_RUNS"));
    b.u64(z.seq);
    b.u32(z.slot_size);
    for r in &z.runs {
        b.u32(r.first);
        b.u32(r.slots);
        b.u64(r.head_at);
        b.u64(r.data_at);
    }
}

fn encode_runs(b: &mut Body, runs: &[Run]) {
    b.u32(u32::try_from(runs.len()).expect("runs are bounded by MAX_MAP_RUNS"));
    for r in runs {
        b.u64(r.file_block);
        b.u64(r.pool_off);
        b.u64(r.blocks);
    }
}

fn decode(kind: u32, body: &[u8]) -> io::Result<Msg> {
    let mut c = Cursor(body);
    let msg = match kind {
        kind::HELLO => Msg::Hello { version: c.u32()? },
        kind::WELCOME => Msg::Welcome(Welcome {
            version: c.u32()?,
            pool_dev: c.u64()?,
            pool_ino: c.u64()?,
            pool_size: c.u64()?,
            emulate: String::from_utf8(c.text()?).map_err(|_| bad("emulator spec"))?,
            pool: PathBuf::from(std::ffi::OsString::from_vec(c.text()?)),
        }),
        kind::ASK => Msg::Ask {
            seq: c.u64()?,
            ino: c.u64()?,
            window: c.u64()?,
            write: match c.u32()? {
                0 => false,
                1 => true,
                _ => return Err(bad("unknown lease mode")),
            },
        },
        kind::GRANTED => Msg::Granted(decode_grant(&mut c)?),
        kind::MAP_ASK => Msg::MapAsk {
            seq: c.u64()?,
            ino: c.u64()?,
            first: c.u64()?,
            blocks: c.u64()?,
            writable: match c.u32()? {
                0 => false,
                1 => true,
                _ => return Err(bad("unknown map mode")),
            },
        },
        kind::MAPPED => Msg::Mapped {
            seq: c.u64()?,
            ino: c.u64()?,
            lease: c.u64()?,
            runs: decode_runs(&mut c, MAX_MAP_RUNS)?,
        },
        kind::REFUSED => Msg::Refused {
            seq: c.u64()?,
            ino: c.u64()?,
            why: match c.u32()? {
                0 => Refusal::Busy,
                1 => Refusal::Unleasable,
                2 => Refusal::Limit,
                3 => Refusal::Contended,
                4 => Refusal::Mapped,
                _ => return Err(bad("unknown refusal")),
            },
        },
        kind::RETURN | kind::RECALL | kind::RECALLED => {
            let (ino, lease) = (c.u64()?, c.u64()?);
            match kind {
                kind::RETURN => Msg::Return { ino, lease },
                kind::RECALL => Msg::Recall { ino, lease },
                _ => Msg::Recalled { ino, lease },
            }
        }
        kind::MAPS => Msg::Maps {
            seq: c.u64()?,
            ino: c.u64()?,
        },
        kind::NOTED => Msg::Noted { seq: c.u64()? },
        _ => return Err(bad("unknown message")),
    };
    if !c.0.is_empty() {
        return Err(bad("bytes after a message"));
    }
    Ok(msg)
}

fn decode_runs(c: &mut Cursor<'_>, most: usize) -> io::Result<Vec<Run>> {
    let n = c.u32()? as usize;
    if n > most {
        return Err(bad("more runs than a grant may carry"));
    }
    (0..n)
        .map(|_| {
            Ok(Run {
                file_block: c.u64()?,
                pool_off: c.u64()?,
                blocks: c.u64()?,
            })
        })
        .collect()
}

fn decode_grant(c: &mut Cursor<'_>) -> io::Result<Grant> {
    let (seq, ino, window) = (c.u64()?, c.u64()?, c.u64()?);
    let (lease, size) = (c.u64()?, c.u64()?);
    let runs = decode_runs(c, MAX_RUNS)?;
    let writes = match c.u32()? {
        0 => None,
        1 => Some(decode_writes(c)?),
        _ => return Err(bad("unknown lease mode")),
    };
    Ok(Grant {
        seq,
        ino,
        window,
        lease,
        size,
        runs,
        writes,
    })
}

fn decode_writes(c: &mut Cursor<'_>) -> io::Result<Writes> {
    let (generation, seq, records) = (c.u32()?, c.u64()?, c.u64()?);
    let (log, mapped, head_at, head) = (c.u64()?, c.u64()?, c.u64()?, c.u64()?);
    let n = c.u32()? as usize;
    if n > MAX_GRANTED {
        return Err(bad("more blocks than a grant may carry"));
    }
    let blocks = (0..n).map(|_| c.u64()).collect::<io::Result<Vec<u64>>>()?;
    let slots = decode_slots(c)?;
    Ok(Writes {
        generation,
        seq,
        records,
        log,
        mapped,
        // Block 0 is never a file's: 0 says "no block", as in an entry.
        head: (head != 0).then_some((head_at, head)),
        blocks,
        slots,
    })
}

/// A grant's zone slots: none when it has no runs.
fn decode_slots(c: &mut Cursor<'_>) -> io::Result<Option<LeasedSlots>> {
    let n = c.u32()? as usize;
    if n == 0 {
        return Ok(None);
    }
    if n > MAX_SLOT_RUNS {
        return Err(bad("more slot runs than a grant may carry"));
    }
    let (seq, slot_size) = (c.u64()?, c.u32()?);
    let runs = (0..n)
        .map(|_| {
            Ok(SlotRun {
                first: c.u32()?,
                slots: c.u32()?,
                head_at: c.u64()?,
                data_at: c.u64()?,
            })
        })
        .collect::<io::Result<Vec<SlotRun>>>()?;
    Ok(Some(LeasedSlots {
        seq,
        slot_size,
        runs,
    }))
}

#[derive(Default)]
struct Body(Vec<u8>);

impl Body {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn text(&mut self, t: &[u8]) {
        let t = &t[..t.len().min(MAX_TEXT)];
        self.u32(t.len() as u32);
        self.0.extend_from_slice(t);
    }
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> io::Result<&[u8]> {
        if self.0.len() < n {
            return Err(bad("a message cut short"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u32(&mut self) -> io::Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> io::Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn text(&mut self) -> io::Result<Vec<u8>> {
        let n = self.u32()? as usize;
        if n > MAX_TEXT {
            return Err(bad("a string longer than any path"));
        }
        Ok(self.take(n)?.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(m: Msg) {
        let mut buf = Vec::new();
        send(&mut buf, &m).unwrap();
        assert_eq!(recv(&mut &buf[..]).unwrap(), Some(m));
    }

    #[test]
    fn every_message_round_trips() {
        round_trip(Msg::Hello { version: VERSION });
        round_trip(Msg::Welcome(Welcome {
            version: VERSION,
            pool_dev: 1,
            pool_ino: 2,
            pool_size: 3 << 30,
            emulate: "dram".into(),
            pool: PathBuf::from("/dev/shm/a.pool"),
        }));
        for write in [false, true] {
            round_trip(Msg::Ask {
                seq: 9,
                ino: 12,
                window: 3,
                write,
            });
        }
        round_trip(Msg::Granted(Grant {
            seq: 9,
            ino: 12,
            window: 0,
            lease: 4,
            size: 10_000,
            runs: vec![Run {
                file_block: 0,
                pool_off: 1 << 20,
                blocks: 3,
            }],
            writes: None,
        }));
        round_trip(Msg::Granted(Grant {
            seq: 10,
            ino: 12,
            window: 1,
            lease: 5,
            size: 1 << 30,
            runs: Vec::new(),
            writes: Some(Writes {
                generation: 3,
                seq: 77,
                records: 8 << 20,
                log: 1 << 14,
                mapped: 40,
                head: Some((39, 900)),
                blocks: vec![500, 501, 900],
                slots: Some(LeasedSlots {
                    seq: 9,
                    slot_size: 64,
                    runs: vec![SlotRun {
                        first: 70,
                        slots: 512,
                        head_at: 3 << 20,
                        data_at: 4 << 20,
                    }],
                }),
            }),
        }));
        for why in [
            Refusal::Busy,
            Refusal::Unleasable,
            Refusal::Limit,
            Refusal::Contended,
            Refusal::Mapped,
        ] {
            round_trip(Msg::Refused {
                seq: 1,
                ino: 2,
                why,
            });
        }
        round_trip(Msg::Return { ino: 5, lease: 6 });
        round_trip(Msg::Recall { ino: 5, lease: 6 });
        round_trip(Msg::Recalled { ino: 5, lease: 6 });
        round_trip(Msg::Maps { seq: 7, ino: 5 });
        round_trip(Msg::Maps {
            seq: 8,
            ino: ALL_FILES,
        });
        round_trip(Msg::Noted { seq: 7 });
    }

    #[test]
    fn map_messages_round_trip() {
        round_trip(Msg::MapAsk {
            seq: 3,
            ino: 9,
            first: 16,
            blocks: 300,
            writable: true,
        });
        round_trip(Msg::Mapped {
            seq: 3,
            ino: 9,
            lease: 44,
            runs: vec![Run {
                file_block: 16,
                pool_off: 1 << 21,
                blocks: 2,
            }],
        });
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut buf = Vec::new();
        let ask = Msg::Ask {
            seq: 1,
            ino: 2,
            window: 0,
            write: true,
        };
        send(&mut buf, &ask).unwrap();
        // Every truncation, and every single-byte change of the header.
        for cut in 1..buf.len() {
            assert!(recv(&mut &buf[..cut]).map_or(true, |m| m.is_none() || cut == buf.len()));
        }
        for i in 0..HEADER {
            let mut b = buf.clone();
            b[i] ^= 0xff;
            assert!(recv(&mut &b[..]).is_err(), "byte {i}");
        }
        let mut huge = buf.clone();
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(recv(&mut &huge[..]).is_err());
        assert_eq!(recv(&mut &[][..]).unwrap(), None);
    }
}
