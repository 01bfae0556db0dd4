//! Read leases: a process preloaded with the interposer reads a file on
//! a mounted pool from its own mapping of the pool, with no round trip to
//! the daemon, while the daemon — the pool's only writer — promises to
//! recall the lease before it changes the file (design.md §17).
//!
//! The layers: the messages on the socket (`wire`), the daemon's table of
//! leases and the rule every change of a file follows (`table`), the
//! daemon's socket and who may connect (`server`), the count of closes on
//! the mount it shares with every client (`closes`), and the client's
//! connection, mapping and recall thread (`client`).
#![forbid(unsafe_code)]

mod client;
mod closes;
mod contention;
mod maps;
mod moved;
mod owner;
mod server;
mod slices;
mod table;
mod wire;
mod writer;

pub use client::{At, Client, Held, Written};
pub use closes::Closes;
pub use maps::{MapWin, MAX_MAPPED};
pub use owner::Owner;
pub use server::{LeaseServer, MAX_CLIENTS};
pub use table::{CacheInvalidator, Exclusive, Leases, Unresponsive, MAX_LEASES_PER_CLIENT};
pub use wire::{Welcome, Writes, ALL_FILES, MAX_GRANTED, VERSION, WINDOW_BLOCKS};
pub use writer::{NotMine, Writer};

/// How long a recall waits for the client's answer before cutting it off.
pub const RECALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The name of the root's virtual extended attribute that holds the lease
/// socket's path: only a process that can see the mount finds it.
pub const CONTROL_XATTR: &str = "user.amberfs.control";

/// Writes a line to the daemon's log (its standard error); a closed one
/// loses the line, never the daemon.
pub(crate) fn log(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "amberfs: {line}");
}
