//! On-media format.
#![forbid(unsafe_code)]
