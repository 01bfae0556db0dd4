//! The mount daemon's log: its own lines and those of the libraries it
//! runs. fuser reports what goes wrong on its side (a reply it could not
//! send, a request it does not implement, a failed unmount) through the
//! `log` crate, which drops every record until a logger is installed;
//! [`install`] makes those records lines of the same log, in the same
//! format. The daemon's stderr is its log file (`--log`), or the terminal
//! under `--foreground`.

use std::io::Write;

use crate::common::format_time;
use crate::output::note;

/// Records below this level are dropped: fuser's debug and trace output
/// is a line per request, and its info lines repeat the daemon's own.
const LEVEL: log::LevelFilter = log::LevelFilter::Warn;

/// One line of the log: UTC time, pid, message.
pub fn line(message: &str) {
    note(format_args!(
        "{} amberfs[{}]: {message}",
        format_time(amber_core::wall()),
        std::process::id()
    ));
}

/// Writes every record at or above [`LEVEL`] as a [`line`] naming its
/// level and the module that logged it.
struct DaemonLogger;

impl log::Log for DaemonLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= LEVEL
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            line(&format!(
                "{} {}: {}",
                record.level(),
                record.target(),
                record.args()
            ));
        }
    }

    fn flush(&self) {
        let _ = std::io::stderr().flush();
    }
}

static LOGGER: DaemonLogger = DaemonLogger;

/// Installs the logger for the rest of the process. A second call (or a
/// logger some library installed first) leaves the first one in place.
pub fn install() {
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(LEVEL);
    }
}
