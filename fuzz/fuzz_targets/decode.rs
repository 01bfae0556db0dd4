//! Every decoder of the on-media format over arbitrary bytes
//! (`amber_fuzz::decode::decode_all`).
#![no_main]
#![forbid(unsafe_code)]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| amber_fuzz::decode::decode_all(data));
