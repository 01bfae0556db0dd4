//! Crash simulator (being built).
#![forbid(unsafe_code)]
