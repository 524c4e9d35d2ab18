//! Any jq expression, run on any JSON input, gives a value or an error within its budget:
//! never a crash, a hang or a blow-up of memory. The input is split at the first NUL: the
//! expression before it, the JSON input after (null when it is not JSON).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ratchet_workflow::Expression;

fuzz_target!(|data: &[u8]| {
    let (code, input) = match data.iter().position(|b| *b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &b""[..]),
    };
    let code = String::from_utf8_lossy(code);
    let input = serde_json::from_slice(input).unwrap_or(serde_json::Value::Null);
    if let Ok(expr) = Expression::compile(&code) {
        let _ = expr.evaluate(&input);
    }
});
