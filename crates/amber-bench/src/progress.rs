//! A progress bar on stderr for long runs, so a user knows a ten-minute
//! matrix is moving and roughly when it ends. It stays silent for the
//! first two seconds (short runs print nothing), when stderr is not a
//! terminal (logs and CI output stay clean), and after [`set_quiet`].
//! Shareable between threads: workers call [`Progress::inc`] on a `&Progress`.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static QUIET: AtomicBool = AtomicBool::new(false);

/// Writes one line to stderr. A closed or broken stderr (`2>&1 | head`)
/// loses the line, never the run, as `eprintln!` would by panicking.
pub fn note(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Silences every progress bar of this process (`--quiet`).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Runs shorter than this never show a bar.
const SHOW_AFTER: Duration = Duration::from_secs(2);
/// Redrawing more often only costs the measured threads CPU time.
const REDRAW_EVERY: Duration = Duration::from_millis(200);
const BAR_WIDTH: usize = 24;

/// A count of done units out of a known total.
pub struct Progress {
    label: String,
    total: u64,
    done: AtomicU64,
    start: Instant,
    enabled: bool,
    /// When the bar was last drawn; `None` until it first is.
    drawn: Mutex<Option<Instant>>,
}

impl Progress {
    pub fn new(total: u64, label: &str) -> Progress {
        let enabled = !QUIET.load(Ordering::Relaxed) && std::io::stderr().is_terminal();
        Progress {
            label: label.to_string(),
            total,
            done: AtomicU64::new(0),
            start: Instant::now(),
            enabled,
            drawn: Mutex::new(None),
        }
    }

    /// Marks `n` more units done and redraws if it is time to.
    pub fn inc(&self, n: u64) {
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        if !self.enabled {
            return;
        }
        let elapsed = self.start.elapsed();
        if elapsed < SHOW_AFTER {
            return;
        }
        let mut drawn = self.drawn.lock().expect("progress lock");
        if drawn.is_some_and(|t| t.elapsed() < REDRAW_EVERY) {
            return;
        }
        *drawn = Some(Instant::now());
        let line = render(&self.label, done, self.total, elapsed);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{line}\x1b[K");
        let _ = err.flush();
    }

    /// Draws the final state and ends the line, if a bar was ever shown;
    /// the terminal is left as it was otherwise.
    pub fn finish(&self) {
        let mut drawn = self.drawn.lock().expect("progress lock");
        if drawn.take().is_some() {
            let done = self.done.load(Ordering::Relaxed);
            let line = render(&self.label, done, self.total, self.start.elapsed());
            note(format_args!("\r{line}\x1b[K"));
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

fn secs(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// One line: label, bar, done/total, elapsed and the time left at the
/// rate so far (unknown until something is done).
pub fn render(label: &str, done: u64, total: u64, elapsed: Duration) -> String {
    let done = done.min(total);
    let frac = if total == 0 {
        1.0
    } else {
        done as f64 / total as f64
    };
    let filled = ((frac * BAR_WIDTH as f64).round() as usize).min(BAR_WIDTH);
    let bar = format!("{}{}", "#".repeat(filled), "-".repeat(BAR_WIDTH - filled));
    let eta = if done == 0 {
        "?".to_string()
    } else {
        secs(elapsed.mul_f64((total - done) as f64 / done as f64))
    };
    format!(
        "{label} [{bar}] {done}/{total} elapsed {} eta {eta}",
        secs(elapsed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_bar_counts_and_eta() {
        let s = render("iozone", 5, 20, Duration::from_secs(10));
        assert_eq!(
            s,
            "iozone [######------------------] 5/20 elapsed 10.0s eta 30.0s"
        );
        let s = render("x", 0, 3, Duration::from_millis(2500));
        assert!(s.ends_with("0/3 elapsed 2.5s eta ?"), "{s}");
        let s = render("x", 9, 9, Duration::from_secs(125));
        assert!(s.contains(&"#".repeat(BAR_WIDTH)), "{s}");
        assert!(s.ends_with("elapsed 2m05s eta 0.0s"), "{s}");
        assert!(render("x", 1, 2, Duration::from_secs(4000)).contains("1h06m"));
        assert!(render("x", 0, 0, Duration::ZERO).contains(&"#".repeat(BAR_WIDTH)));
    }

    #[test]
    fn silent_bar_counts_and_finishes_without_output() {
        set_quiet(true);
        let p = Progress::new(4, "t");
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| p.inc(1));
            }
        });
        assert_eq!(p.done.load(Ordering::Relaxed), 4);
        assert!(p.drawn.lock().unwrap().is_none());
        p.finish();
    }
}
