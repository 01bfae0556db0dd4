//! A small pool of either layout, damaged as the input says, through
//! fsck, repair, mount and a walk of every file
//! (`amber_fuzz::check_case`): a broken promise panics with its story.
#![no_main]
#![forbid(unsafe_code)]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = amber_fuzz::check_case(data) {
        panic!("{e}");
    }
});
