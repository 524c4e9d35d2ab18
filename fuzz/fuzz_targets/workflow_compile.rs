//! Any text given to the workflow compiler gets a definition or errors, never a crash, a
//! hang or a blow-up of memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let source = String::from_utf8_lossy(data);
    let _ = ratchet_workflow::Workflow::compile(&source);
});
