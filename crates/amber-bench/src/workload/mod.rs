//! The papers' workloads, written once against [`Target`] so every target
//! does the same operations on the same data volume.
//!
//! Each workload is a generator of operations over a model of the file
//! set (which files exist, how big, which regions were overwritten). The
//! generator runs inside the measured loop and updates the model as it
//! goes; the model is never read back from the target. After the timed
//! repetitions, a separate untimed pass compares every file on the target
//! with what the model says it must hold, byte for byte: a skipped write,
//! a lost append or a corrupted block fails the run instead of speeding it
//! up. File content is a function of (seed, file, version, offset), so it
//! needs no storage to be checked.

pub mod fileserver;
pub mod populate;
pub mod randwrite;
pub mod varmail;
pub mod webproxy;
pub mod webserver;

use crate::target::{Target, TargetFile};
use amber_sim::SplitMix64;
use std::collections::BTreeSet;
use std::io;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Every workload by name, in the order help text lists them.
pub const NAMES: &[&str] = &[
    "fileserver",
    "webserver",
    "webproxy",
    "varmail",
    "randwrite",
    "populate",
];

/// When a measured repetition stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// This many operations in total, split over the threads: the same
    /// work for every target, so the default (sized for about a second
    /// per repetition on an Amber pool under `dram`).
    Ops(u64),
    /// Each thread runs this long (the filebench way; the work done then
    /// differs between targets).
    Duration(Duration),
    /// Until the workload's work is done (populate: every file written).
    Complete,
}

/// When a writer makes its data durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fsync {
    /// After every write (the synchronous mode of lawn.txt §5.2).
    Every,
    /// After every Nth write.
    EveryN(u64),
    None,
}

impl Fsync {
    /// Parses `every`, `none` or a positive count N.
    pub fn parse(s: &str) -> Result<Fsync, String> {
        match s {
            "every" => Ok(Fsync::Every),
            "none" => Ok(Fsync::None),
            n => match n.parse::<u64>() {
                Ok(0) | Err(_) => Err(format!(
                    "--fsync {s:?}: use `every`, `none` or a positive count N (fsync after every Nth write)"
                )),
                Ok(1) => Ok(Fsync::Every),
                Ok(n) => Ok(Fsync::EveryN(n)),
            },
        }
    }

    /// Whether the `n`th write (counting from 1) is followed by an fsync.
    fn after(self, n: u64) -> bool {
        match self {
            Fsync::Every => true,
            Fsync::EveryN(k) => n.is_multiple_of(k),
            Fsync::None => false,
        }
    }
}

impl std::fmt::Display for Fsync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fsync::Every => write!(f, "every"),
            Fsync::EveryN(n) => write!(f, "{n}"),
            Fsync::None => write!(f, "none"),
        }
    }
}

/// A workload's knobs. Not every workload uses every field; each
/// workload's module says which it reads and where its defaults come from.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Files in the set.
    pub files: u64,
    /// Mean file size (exact size for populate and randwrite).
    pub file_size: u64,
    /// Bytes per read or write call.
    pub io_size: u64,
    /// Mean append size (appends are uniform in 1..=2*mean).
    pub append_size: u64,
    /// Entries per directory; a file's depth is log(files)/log(width).
    pub dir_width: u64,
    pub threads: usize,
    pub limit: Limit,
    /// randwrite: reads per ten operations (lawn's 3/7, 5/5, 7/3 mixes).
    pub read_ratio: u32,
    /// randwrite: random writes over the file after setup, untimed and
    /// split over the threads like the timed ops, so that the timed runs
    /// (`read_ratio` 10: reads only) read a file a policy has scattered
    /// (lawn.txt Figure 5(e)). 0: none.
    pub prewrite: u64,
    pub fsync: Fsync,
    pub seed: u64,
}

impl Params {
    /// One line for notes and result files, so a record says what ran.
    pub fn describe(&self) -> String {
        let limit = match self.limit {
            Limit::Ops(n) => format!("ops={n}"),
            Limit::Duration(d) => format!("duration={}s", d.as_secs_f64()),
            Limit::Complete => "until done".into(),
        };
        format!(
            "files={} file_size={} io_size={} append_size={} dir_width={} {limit} read_ratio={}/10 prewrite={} fsync={} seed={}",
            self.files,
            self.file_size,
            self.io_size,
            self.append_size,
            self.dir_width,
            self.read_ratio,
            self.prewrite,
            self.fsync,
            self.seed
        )
    }
}

/// The papers' parameters for `name` (see each workload's module).
pub fn defaults(name: &str) -> Result<Params, String> {
    Ok(match name {
        "fileserver" => fileserver::defaults(),
        "webserver" => webserver::defaults(),
        "webproxy" => webproxy::defaults(),
        "varmail" => varmail::defaults(),
        "randwrite" => randwrite::defaults(),
        "populate" => populate::defaults(),
        _ => return Err(unknown(name)),
    })
}

fn unknown(name: &str) -> String {
    format!(
        "unknown workload {name:?}; choose one of {}",
        NAMES.join(", ")
    )
}

/// Largest single I/O the workbench issues; bounds the pattern buffer.
const MAX_IO: u64 = 64 << 20;

/// Most untimed writes before the timed runs (`--prewrite`): hours at
/// the slowest emulated media, so a typo does not run for days.
const MAX_PREWRITE: u64 = 1 << 30;

/// The random stream of the untimed writes (`--prewrite`), apart from the
/// timed rounds' streams (`round << 20`).
const PREWRITE_STREAM: u64 = 1 << 63;

/// Rejects parameters a workload cannot run with, before any pool is made.
pub fn validate(name: &str, p: &Params) -> Result<(), String> {
    if !NAMES.contains(&name) {
        return Err(unknown(name));
    }
    if p.threads == 0 || p.threads > 1024 {
        return Err("--threads must be 1..=1024".into());
    }
    if p.io_size == 0 || p.io_size > MAX_IO {
        return Err(format!("--io-size must be 1..={MAX_IO} bytes"));
    }
    if p.append_size == 0 || 2 * p.append_size > MAX_IO {
        return Err(format!("--append-size must be 1..={} bytes", MAX_IO / 2));
    }
    if p.dir_width < 2 {
        return Err("--dir-width must be at least 2".into());
    }
    if p.read_ratio > 10 {
        return Err("--read-ratio is reads per ten operations: 0..=10".into());
    }
    if p.file_size == 0 {
        return Err("--file-size must be positive".into());
    }
    match p.limit {
        Limit::Ops(0) => return Err("--ops must be positive".into()),
        Limit::Duration(d) if d.is_zero() => return Err("--duration must be positive".into()),
        Limit::Complete if name != "populate" => {
            return Err(format!("{name} needs --ops or --duration"))
        }
        Limit::Ops(_) | Limit::Duration(_) if name == "populate" => {
            return Err(
                "populate writes each file once; size it with --files and --file-size".into(),
            )
        }
        _ => {}
    }
    let own = defaults(name)?;
    if !matches!(name, "randwrite" | "populate") && p.fsync != own.fsync {
        return Err(format!(
            "{name} fsyncs as the workload defines ({}); --fsync applies to randwrite and populate",
            own.fsync
        ));
    }
    if name != "randwrite" && p.read_ratio != 0 {
        return Err("--read-ratio applies to randwrite only".into());
    }
    if name != "randwrite" && p.prewrite != 0 {
        return Err("--prewrite applies to randwrite only".into());
    }
    if p.prewrite > MAX_PREWRITE {
        return Err(format!("--prewrite must be at most {MAX_PREWRITE} writes"));
    }
    match name {
        "randwrite" => randwrite::validate(p),
        "populate" => Ok(()),
        _ if p.files < 2 * p.threads as u64 => Err(format!(
            "{name} needs at least two files per thread (--files {} with {} threads)",
            p.files, p.threads
        )),
        _ => Ok(()),
    }
}

/// What one timed repetition did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    pub ops: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Write calls (`write_at` and appends) issued to the target: what
    /// lawn.txt's Figure 6 calls I/O requests.
    pub writes: u64,
    /// From the moment all threads start to the moment the last finishes.
    pub elapsed: Duration,
}

/// What the verification pass checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verified {
    /// Files compared byte for byte (and absent files confirmed absent).
    pub files: u64,
    pub bytes: u64,
}

/// A workload bound to one target, keeping the model of its file set
/// between repetitions.
pub trait Session {
    /// Creates the initial file set (untimed).
    fn setup(&mut self) -> io::Result<()>;
    /// Untimed work before a repetition (populate starts from no files).
    fn prepare(&mut self) -> io::Result<()>;
    /// One timed repetition.
    fn run_once(&mut self) -> io::Result<Outcome>;
    /// Compares the target with the model, untimed.
    fn verify(&self) -> io::Result<Verified>;
    /// Removes the workload's directory from the target.
    fn cleanup(&self) -> io::Result<()>;
}

/// Binds workload `name` to `target`; its files live under `wl-NAME`.
pub fn session<'t>(
    name: &str,
    target: &'t dyn Target,
    p: &Params,
) -> Result<Box<dyn Session + 't>, String> {
    validate(name, p)?;
    Ok(match name {
        "fileserver" => FlowSession::boxed(fileserver::Fileserver, name, target, p),
        "webserver" => FlowSession::boxed(webserver::Webserver, name, target, p),
        "webproxy" => FlowSession::boxed(webproxy::Webproxy, name, target, p),
        "varmail" => FlowSession::boxed(varmail::Varmail, name, target, p),
        "randwrite" => FlowSession::boxed(randwrite::Randwrite, name, target, p),
        "populate" => FlowSession::boxed(populate::Populate, name, target, p),
        _ => return Err(unknown(name)),
    })
}

/// The id of the log file webserver's threads share.
pub(crate) const LOG: u64 = u64::MAX;

/// One operation, as filebench's flowops: each counts as one op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Create (truncating) and keep the handle.
    Create {
        file: u64,
    },
    /// Open an existing file and keep the handle.
    Open {
        file: u64,
    },
    /// Write `len` bytes of version `ver` at `off`, in `io_size` calls,
    /// then fsync if `sync`.
    Write {
        file: u64,
        off: u64,
        len: u64,
        ver: u64,
        sync: bool,
    },
    /// Append `len` bytes; the model says the file is `off` bytes long.
    Append {
        file: u64,
        off: u64,
        len: u64,
    },
    /// Append one `len`-byte record to the shared log.
    AppendLog {
        len: u64,
    },
    /// Read `len` bytes from `off`, in `io_size` calls.
    Read {
        file: u64,
        off: u64,
        len: u64,
    },
    Fsync {
        file: u64,
    },
    Delete {
        file: u64,
    },
    Stat {
        file: u64,
    },
}

/// What the target must hold for one file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Content {
    Absent,
    /// Version 0 of the file's content, `size` bytes.
    Pattern {
        size: u64,
    },
    /// `count` records, each the first `len` bytes of version 0.
    Records {
        count: u64,
        len: u64,
    },
    /// Version 0 except the `unit`-sized blocks marked in `covered`,
    /// which hold version 1.
    Patched {
        size: u64,
        unit: u64,
        covered: Vec<u64>,
    },
}

/// A workload: how its threads' models start and how one loop of a thread
/// goes.
pub(crate) trait Flow: Sync {
    type State: Send + Clone;
    fn init(&self, p: &Params, thread: usize) -> Self::State;
    /// One loop of the workload: pushes its operations and applies them to
    /// the model. False when the thread has nothing left to do.
    fn step(
        &self,
        p: &Params,
        rng: &mut SplitMix64,
        s: &mut Self::State,
        ops: &mut Vec<Op>,
    ) -> bool;
    /// Every file the target must hold, given all threads' models.
    fn expected(&self, p: &Params, states: &[Self::State]) -> Vec<(u64, Content)>;
    /// Whether every repetition starts again from the initial file set.
    fn fresh_each_round(&self) -> bool {
        false
    }
}

/// A cap on loops per thread per repetition, so a duration limit on a
/// target that does nothing still ends.
const MAX_STEPS: u64 = 1 << 32;

/// Period of the content pattern: not a multiple of any block size, so
/// neighbouring blocks of a file never hold the same bytes.
const PERIOD: u64 = (1 << 20) + 4093;

/// The bytes every file's content is cut from.
pub(crate) struct Pattern {
    seed: u64,
    bytes: Vec<u8>,
}

impl Pattern {
    fn new(seed: u64, max_len: u64) -> Pattern {
        let mut bytes = vec![0u8; PERIOD as usize];
        SplitMix64::new(seed).fill(&mut bytes);
        // Periodic, so a slice that runs past one period reads the same
        // bytes as one that starts in the next.
        let mut head = 0;
        while head < max_len as usize {
            let n = (max_len as usize - head).min(PERIOD as usize);
            bytes.extend_from_within(head..head + n);
            head += n;
        }
        Pattern { seed, bytes }
    }

    /// Bytes `off..off+len` of version `ver` of file `file`.
    fn slice(&self, file: u64, ver: u64, off: u64, len: u64) -> &[u8] {
        let shift =
            SplitMix64::new(self.seed ^ file.rotate_left(17) ^ ver.rotate_left(43)).below(PERIOD);
        let start = ((shift + off % PERIOD) % PERIOD) as usize;
        &self.bytes[start..start + len as usize]
    }
}

/// Where file `id` lives: `width` entries per directory, as filebench's
/// `meandirwidth`.
pub(crate) struct Layout {
    root: String,
    width: u64,
    levels: u32,
}

impl Layout {
    fn new(root: String, files: u64, width: u64) -> Layout {
        // Directory levels above the files: the smallest k with
        // width^(k+1) >= files.
        let mut levels = 0u32;
        let mut reach = width;
        while reach < files && levels < 64 {
            reach = reach.saturating_mul(width);
            levels += 1;
        }
        Layout {
            root,
            width,
            levels,
        }
    }

    fn parent(&self, id: u64) -> String {
        let mut q = if id == LOG { 0 } else { id / self.width };
        let mut comps = Vec::with_capacity(self.levels as usize);
        if id != LOG {
            for _ in 0..self.levels {
                comps.push(format!("d{}", q % self.width));
                q /= self.width;
            }
        }
        comps.push(self.root.clone());
        comps.reverse();
        comps.join("/")
    }

    pub(crate) fn path(&self, id: u64) -> String {
        if id == LOG {
            format!("{}/log", self.root)
        } else {
            format!("{}/f{id}", self.parent(id))
        }
    }
}

/// A file size drawn uniformly from [mean/2, 3*mean/2] (filebench draws
/// from a gamma distribution with the same mean; uniform keeps the data
/// volume predictable).
pub(crate) fn draw_size(rng: &mut SplitMix64, mean: u64) -> u64 {
    (mean / 2 + rng.below(mean.max(1))).max(1)
}

/// The size file `id` starts with, the same in setup and verification.
pub(crate) fn initial_size(p: &Params, id: u64) -> u64 {
    draw_size(
        &mut SplitMix64::new(p.seed ^ id.wrapping_mul(0x9E37_79B9)),
        p.file_size,
    )
}

/// An append length, uniform in 1..=2*mean.
pub(crate) fn draw_append(rng: &mut SplitMix64, mean: u64) -> u64 {
    1 + rng.below(2 * mean)
}

/// The files one thread owns (filebench's fileserver gives each thread
/// its own; owning them keeps every thread's model exact).
#[derive(Debug, Clone)]
pub(crate) struct FileSet {
    ids: Vec<u64>,
    sizes: Vec<u64>,
    present: Vec<usize>,
    absent: Vec<usize>,
}

impl FileSet {
    /// Files `thread`, `thread + threads`, ...; `prealloc` percent of them
    /// exist at the start (filebench's `prealloc`).
    pub(crate) fn new(p: &Params, thread: usize, prealloc: u64) -> FileSet {
        let ids: Vec<u64> = (thread as u64..p.files).step_by(p.threads).collect();
        let sizes: Vec<u64> = ids.iter().map(|&id| initial_size(p, id)).collect();
        let (mut present, mut absent) = (Vec::new(), Vec::new());
        for (l, &id) in ids.iter().enumerate() {
            if SplitMix64::new(p.seed ^ id.rotate_left(29)).below(100) < prealloc {
                present.push(l);
            } else {
                absent.push(l);
            }
        }
        FileSet {
            ids,
            sizes,
            present,
            absent,
        }
    }

    pub(crate) fn id(&self, l: usize) -> u64 {
        self.ids[l]
    }

    /// A random existing file.
    pub(crate) fn pick(&self, rng: &mut SplitMix64) -> Option<usize> {
        (!self.present.is_empty())
            .then(|| self.present[rng.below(self.present.len() as u64) as usize])
    }

    /// Deletes a random existing file: its op.
    pub(crate) fn delete(&mut self, rng: &mut SplitMix64) -> Option<Op> {
        if self.present.is_empty() {
            return None;
        }
        let l = self
            .present
            .swap_remove(rng.below(self.present.len() as u64) as usize);
        self.absent.push(l);
        Some(Op::Delete { file: self.ids[l] })
    }

    /// Creates a random missing file of `size` bytes (written whole, in
    /// `io_size` calls): its ops. When all exist, one is deleted first.
    pub(crate) fn create(&mut self, rng: &mut SplitMix64, size: u64, ops: &mut Vec<Op>) -> usize {
        if self.absent.is_empty() {
            ops.extend(self.delete(rng));
        }
        let l = self
            .absent
            .swap_remove(rng.below(self.absent.len() as u64) as usize);
        self.present.push(l);
        self.sizes[l] = size;
        let file = self.ids[l];
        ops.push(Op::Create { file });
        if size > 0 {
            ops.push(Op::Write {
                file,
                off: 0,
                len: size,
                ver: 0,
                sync: false,
            });
        }
        l
    }

    /// Appends `len` bytes to file `l`: its op.
    pub(crate) fn append(&mut self, l: usize, len: u64) -> Op {
        let op = Op::Append {
            file: self.ids[l],
            off: self.sizes[l],
            len,
        };
        self.sizes[l] += len;
        op
    }

    /// Opens file `l` and reads it whole: its ops.
    pub(crate) fn read_whole(&self, l: usize, ops: &mut Vec<Op>) {
        let file = self.ids[l];
        ops.push(Op::Open { file });
        ops.push(Op::Read {
            file,
            off: 0,
            len: self.sizes[l],
        });
    }

    pub(crate) fn expected(&self) -> impl Iterator<Item = (u64, Content)> + '_ {
        let present: BTreeSet<usize> = self.present.iter().copied().collect();
        self.ids.iter().enumerate().map(move |(l, &id)| {
            let c = if present.contains(&l) {
                Content::Pattern {
                    size: self.sizes[l],
                }
            } else {
                Content::Absent
            };
            (id, c)
        })
    }
}

/// Runs operations on one thread's target handles.
struct Exec<'a> {
    t: &'a dyn Target,
    layout: &'a Layout,
    pat: &'a Pattern,
    io: u64,
    cur: Option<(u64, Box<dyn TargetFile>)>,
    log: Option<Box<dyn TargetFile>>,
    buf: Vec<u8>,
    /// Folds a byte of every read so no read is dead code.
    sink: u64,
    read: u64,
    written: u64,
    writes: u64,
}

impl<'a> Exec<'a> {
    fn new(t: &'a dyn Target, layout: &'a Layout, pat: &'a Pattern, io: u64) -> Self {
        Exec {
            t,
            layout,
            pat,
            io,
            cur: None,
            log: None,
            buf: Vec::new(),
            sink: 0,
            read: 0,
            written: 0,
            writes: 0,
        }
    }

    /// The handle of `file`, opening it if the last op left another.
    fn file(&mut self, file: u64) -> io::Result<&mut Box<dyn TargetFile>> {
        if self.cur.as_ref().map(|c| c.0) != Some(file) {
            self.cur = Some((file, self.t.open(&self.layout.path(file), false)?));
        }
        Ok(&mut self.cur.as_mut().expect("just opened").1)
    }

    /// Writes `len` bytes of version `ver` at `off` in `io`-sized calls,
    /// then fsyncs if `sync`.
    fn write_range(
        &mut self,
        file: u64,
        off: u64,
        len: u64,
        ver: u64,
        sync: bool,
    ) -> io::Result<()> {
        let (pat, io) = (self.pat, self.io);
        let f = self.file(file)?;
        let (mut done, mut calls) = (0, 0);
        while done < len {
            let n = io.min(len - done);
            f.write_at(pat.slice(file, ver, off + done, n), off + done)?;
            done += n;
            calls += 1;
        }
        if sync {
            f.fsync()?;
        }
        self.written += len;
        self.writes += calls;
        Ok(())
    }

    /// Reads `len` bytes at `off` in `io`-sized calls, each of which must
    /// return in full, and folds a byte of each into the sink.
    fn read_range(&mut self, file: u64, off: u64, len: u64) -> io::Result<()> {
        let io = self.io;
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(io.min(len.max(1)) as usize, 0);
        let f = self.file(file)?;
        let mut done = 0;
        let mut sink = 0u64;
        while done < len {
            let n = io.min(len - done) as usize;
            let got = f.read_at(&mut buf[..n], off + done)?;
            if got != n {
                return Err(io::Error::other(format!(
                    "short read of {}: {got} of {n} bytes at {}",
                    self.layout.path(file),
                    off + done
                )));
            }
            sink = sink.wrapping_add(u64::from(buf[n - 1]));
            done += n as u64;
        }
        self.buf = buf;
        self.sink = std::hint::black_box(self.sink.wrapping_add(sink));
        self.read += len;
        Ok(())
    }

    fn run(&mut self, op: &Op) -> io::Result<()> {
        match *op {
            Op::Create { file } => {
                self.cur = None;
                self.cur = Some((file, self.t.create(&self.layout.path(file), false)?));
            }
            Op::Open { file } => {
                self.cur = None;
                self.file(file)?;
            }
            Op::Write {
                file,
                off,
                len,
                ver,
                sync,
            } => self.write_range(file, off, len, ver, sync)?,
            Op::Append { file, off, len } => {
                let pat = self.pat;
                self.file(file)?.append(pat.slice(file, 0, off, len))?;
                self.written += len;
                self.writes += 1;
            }
            Op::AppendLog { len } => {
                if self.log.is_none() {
                    self.log = Some(self.t.open(&self.layout.path(LOG), true)?);
                }
                let rec = self.pat.slice(LOG, 0, 0, len);
                self.log.as_mut().expect("opened").append(rec)?;
                self.written += len;
                self.writes += 1;
            }
            Op::Read { file, off, len } => self.read_range(file, off, len)?,
            Op::Fsync { file } => self.file(file)?.fsync()?,
            Op::Delete { file } => {
                if self.cur.as_ref().map(|c| c.0) == Some(file) {
                    self.cur = None;
                }
                self.t.remove_file(&self.layout.path(file))?;
            }
            Op::Stat { file } => {
                let s = self.t.size(&self.layout.path(file))?;
                self.sink = std::hint::black_box(self.sink.wrapping_add(s));
            }
        }
        Ok(())
    }
}

/// A [`Flow`] bound to a target: the [`Session`] every workload uses.
struct FlowSession<'t, F: Flow> {
    flow: F,
    t: &'t dyn Target,
    p: Params,
    layout: Layout,
    pat: Pattern,
    states: Vec<F::State>,
    rounds: u64,
}

impl<'t, F: Flow + 't> FlowSession<'t, F> {
    fn boxed(flow: F, name: &str, t: &'t dyn Target, p: &Params) -> Box<dyn Session + 't> {
        let max_len = (p.io_size.max(2 * p.append_size)).max(VERIFY_CHUNK);
        let states = (0..p.threads).map(|i| flow.init(p, i)).collect();
        Box::new(FlowSession {
            flow,
            t,
            layout: Layout::new(format!("wl-{name}"), p.files, p.dir_width),
            pat: Pattern::new(p.seed ^ 0x5eed_da7a, max_len),
            states,
            p: p.clone(),
            rounds: 0,
        })
    }
}

/// Bytes per call when setting up and verifying files.
const VERIFY_CHUNK: u64 = 1 << 20;

impl<F: Flow> FlowSession<'_, F> {
    /// Writes the files the model says exist (untimed).
    fn materialize(&self) -> io::Result<()> {
        let expected = self.flow.expected(&self.p, &self.states);
        let dirs: BTreeSet<String> = expected
            .iter()
            .map(|(id, _)| self.layout.parent(*id))
            .collect();
        for d in &dirs {
            self.t.mkdir_all(d)?;
        }
        for (id, c) in &expected {
            let path = self.layout.path(*id);
            let (size, unit, covered): (u64, u64, &[u64]) = match c {
                Content::Absent => continue,
                Content::Pattern { size } => (*size, *size, &[]),
                Content::Records { count, len } => {
                    let mut f = self.t.create(&path, false)?;
                    for _ in 0..*count {
                        f.append(self.pat.slice(*id, 0, 0, *len))?;
                    }
                    continue;
                }
                Content::Patched {
                    size,
                    unit,
                    covered,
                } => (*size, *unit, covered),
            };
            let mut f = self.t.create(&path, false)?;
            let mut off = 0;
            while off < size {
                let n = VERIFY_CHUNK.min(size - off);
                let ver = u64::from(is_covered(covered, off / unit.max(1)));
                let n = if covered.is_empty() {
                    n
                } else {
                    n.min(unit - off % unit)
                };
                f.write_at(self.pat.slice(*id, ver, off, n), off)?;
                off += n;
            }
        }
        Ok(())
    }

    /// Runs every thread's loop under `p` (the session's parameters, or
    /// the prewrite's), each thread's random stream drawn from `stream`.
    fn run_threads(&mut self, p: &Params, stream: u64) -> io::Result<Outcome> {
        let threads = p.threads;
        let barrier = Barrier::new(threads);
        let states = std::mem::take(&mut self.states);
        let (flow, t, layout, pat) = (&self.flow, self.t, &self.layout, &self.pat);
        let results: Vec<io::Result<(F::State, Outcome)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = states
                .into_iter()
                .enumerate()
                .map(|(i, state)| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        let quota = match p.limit {
                            Limit::Ops(n) => {
                                n / threads as u64 + u64::from((i as u64) < n % threads as u64)
                            }
                            Limit::Duration(_) | Limit::Complete => u64::MAX,
                        };
                        let rng =
                            SplitMix64::new(SplitMix64::new(p.seed ^ stream ^ i as u64).next_u64());
                        let ex = Exec::new(t, layout, pat, p.io_size);
                        barrier.wait();
                        run_thread(flow, p, ex, rng, quota, state)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(io::Error::other("workload thread panicked")))
                })
                .collect()
        });
        let mut total = Outcome::default();
        for r in results {
            let (state, o) = r?;
            self.states.push(state);
            total.ops += o.ops;
            total.bytes_read += o.bytes_read;
            total.bytes_written += o.bytes_written;
            total.writes += o.writes;
            total.elapsed = total.elapsed.max(o.elapsed);
        }
        Ok(total)
    }
}

/// One thread's timed loop: steps `flow` until the limit (`quota` ops,
/// or the duration) or the flow ends, running each step's ops on `ex`.
fn run_thread<F: Flow>(
    flow: &F,
    p: &Params,
    mut ex: Exec<'_>,
    mut rng: SplitMix64,
    quota: u64,
    mut state: F::State,
) -> io::Result<(F::State, Outcome)> {
    let mut ops = Vec::new();
    let mut count = 0u64;
    let start = Instant::now();
    for _ in 0..MAX_STEPS {
        let over = match p.limit {
            Limit::Duration(d) => start.elapsed() >= d,
            Limit::Ops(_) | Limit::Complete => count >= quota,
        };
        ops.clear();
        if over || !flow.step(p, &mut rng, &mut state, &mut ops) {
            break;
        }
        for op in &ops {
            ex.run(op)?;
        }
        count += ops.len() as u64;
    }
    let elapsed = start.elapsed();
    Ok((
        state,
        Outcome {
            ops: count,
            bytes_read: ex.read,
            bytes_written: ex.written,
            writes: ex.writes,
            elapsed,
        },
    ))
}

fn is_covered(bits: &[u64], unit: u64) -> bool {
    bits.get((unit / 64) as usize)
        .is_some_and(|w| w >> (unit % 64) & 1 == 1)
}

impl<F: Flow> Session for FlowSession<'_, F> {
    fn setup(&mut self) -> io::Result<()> {
        self.t.remove_all(&self.layout.root)?;
        self.t.mkdir_all(&self.layout.root)?;
        self.states = (0..self.p.threads)
            .map(|i| self.flow.init(&self.p, i))
            .collect();
        self.materialize()?;
        if self.p.prewrite > 0 {
            // The flow's own writes, so the model knows what they stored.
            let pre = Params {
                limit: Limit::Ops(self.p.prewrite),
                read_ratio: 0,
                ..self.p.clone()
            };
            let done = self.run_threads(&pre, PREWRITE_STREAM)?;
            assert_eq!(done.writes, self.p.prewrite, "prewrite ops are writes");
        }
        Ok(())
    }

    fn prepare(&mut self) -> io::Result<()> {
        if self.flow.fresh_each_round() && self.rounds > 0 {
            self.setup()?;
        }
        Ok(())
    }

    fn run_once(&mut self) -> io::Result<Outcome> {
        let p = self.p.clone();
        let out = self.run_threads(&p, self.rounds << 20);
        self.rounds += 1;
        out
    }

    fn verify(&self) -> io::Result<Verified> {
        let mut v = Verified::default();
        let mut buf = vec![0u8; VERIFY_CHUNK as usize];
        for (id, c) in self.flow.expected(&self.p, &self.states) {
            let path = self.layout.path(id);
            let bad = |what: String| io::Error::other(format!("verify: {path}: {what}"));
            v.files += 1;
            let size = match &c {
                Content::Absent => match self.t.size(&path) {
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(bad(e.to_string())),
                    Ok(_) => return Err(bad("exists but the workload deleted it".into())),
                },
                Content::Pattern { size } | Content::Patched { size, .. } => *size,
                Content::Records { count, len } => count * len,
            };
            let actual = self.t.size(&path).map_err(|e| bad(e.to_string()))?;
            if actual != size {
                return Err(bad(format!("{actual} bytes, expected {size}")));
            }
            let mut f = self.t.open(&path, false)?;
            let mut off = 0;
            while off < size {
                // Each piece lies within one record or one patch unit.
                let mut n = VERIFY_CHUNK.min(size - off);
                let want = match &c {
                    Content::Absent => unreachable!("handled above"),
                    Content::Pattern { .. } => self.pat.slice(id, 0, off, n),
                    Content::Records { len, .. } => {
                        n = n.min(len - off % len);
                        self.pat.slice(id, 0, off % len, n)
                    }
                    Content::Patched { unit, covered, .. } => {
                        n = n.min(unit - off % unit);
                        let ver = u64::from(is_covered(covered, off / unit));
                        self.pat.slice(id, ver, off, n)
                    }
                };
                let got = f.read_at(&mut buf[..n as usize], off)?;
                if got != n as usize || buf[..got] != *want {
                    let at = buf[..got]
                        .iter()
                        .zip(want)
                        .position(|(a, b)| a != b)
                        .unwrap_or(got);
                    return Err(bad(format!("content differs at byte {}", off + at as u64)));
                }
                off += n;
            }
            v.bytes += size;
        }
        Ok(v)
    }

    fn cleanup(&self) -> io::Result<()> {
        self.t.remove_all(&self.layout.root)
    }
}
