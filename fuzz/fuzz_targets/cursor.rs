//! Any text as a page cursor is either a position of that list or refused
//! as a bad cursor (a 400) — never a panic, never another error.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|cursor: &str| {
    idem_store::fuzzing::check_cursor(cursor);
});
