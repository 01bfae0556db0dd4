//! Amber's workbench. Every figure is measured in the same run as its
//! baseline, repeated, interleaved (A, B, A, B, ...) so a noisy machine
//! affects both alike, and reported as a median with its spread.
#![forbid(unsafe_code)]

pub mod bare;
pub mod compare;
pub mod csv;
pub mod foundation;
pub mod iozone;
pub mod legacy;
pub mod plot;
pub mod progress;
pub mod record;
pub mod recovery;
pub mod seeds;
pub mod spec;
pub mod stats;
pub mod target;
pub mod workload;
