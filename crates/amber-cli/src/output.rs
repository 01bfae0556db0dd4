//! What every command prints goes through here: its output lines, its
//! diagnostics, and the local paths inside both.
//!
//! Rust ignores SIGPIPE and `println!` panics when the reader of standard
//! output has gone (`amberfs ls POOL | head -1`). Every line is written
//! with [`out_line`] instead, which turns a closed output into
//! [`CliError::closed_output`]: the command unwinds as from any other
//! error (a mounted pool is still unmounted cleanly) and `main` exits
//! quietly with 141, the status a shell shows for a command that SIGPIPE
//! ended, as coreutils' commands end. Diagnostics never fail a command.

use std::fmt;
use std::io::{self, ErrorKind, Write};
use std::path::Path;

use amber_core::Escaped;

use crate::common::{CliError, CliResult};

/// Exit status for a closed standard output: 128 + SIGPIPE, what a shell
/// reports for a command killed by SIGPIPE.
pub const CLOSED_OUTPUT_STATUS: u8 = 141;

/// `println!` for command output: `outln!("{x}")?`.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::out_line(format_args!($($arg)*))
    };
}
pub(crate) use outln;

/// Writes one line to standard output.
pub fn out_line(line: fmt::Arguments<'_>) -> CliResult<()> {
    let mut out = io::stdout().lock();
    out.write_fmt(line)
        .and_then(|()| out.write_all(b"\n"))
        .map_err(output_error)
}

/// A failed write to standard output, as the command's error.
pub fn output_error(e: io::Error) -> CliError {
    if e.kind() == ErrorKind::BrokenPipe {
        CliError::closed_output()
    } else {
        CliError::new(format!("writing to standard output failed: {e}"))
    }
}

/// Prints a diagnostic the way every amberfs message starts, so scripts and
/// users can tell it apart from a command's regular output. A closed or
/// broken standard error loses the message, never the command.
pub fn warn(message: impl fmt::Display) {
    note(format_args!("amberfs: {message}"));
}

/// Writes one line to standard error (the daemon's log, under `mount`);
/// a closed or broken standard error loses the line, never the command.
pub use amber_bench::progress::note;

/// Local paths in messages, escaped as names in the pool are (control
/// characters and bytes that are not UTF-8 as `\xNN`; see
/// `amber_core::Escaped`).
pub trait Shown {
    fn shown(&self) -> Escaped<'_>;
}

impl Shown for Path {
    fn shown(&self) -> Escaped<'_> {
        Escaped::path(self)
    }
}
