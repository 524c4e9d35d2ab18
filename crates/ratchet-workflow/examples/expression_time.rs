//! What running an expression on its budget costs: typical workflow expressions evaluated
//! by the metered evaluator and by jaq on its own values (unmetered), the median of many runs
//! each, and what compiling one costs (with its trial run on null).
//! `cargo run --release -p ratchet-workflow --example expression_time`.

use std::time::{Duration, Instant};

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{data, Compiler, Ctx, Vars};
use jaq_json::Val;
use ratchet_workflow::Expression;
use serde_json::{json, Value};

const RUNS: usize = 2_000;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn order() -> Value {
    let items: Vec<Value> = (0..50)
        .map(|i| json!({"sku": format!("sku-{i}"), "qty": i % 5 + 1, "price": 9.5 + f64::from(i)}))
        .collect();
    json!({"order": {"id": "o-1", "customer": {"name": "Ada", "tier": "gold"}, "items": items}})
}

/// jaq on its own values, as the engine ran expressions before they were metered.
fn unmetered(code: &str, input: &Value) -> Duration {
    type F = jaq_core::Filter<data::JustLut<Val>>;
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs());
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs());
    let arena = Arena::default();
    let modules = Loader::new(defs)
        .load(&arena, File { code, path: () })
        .unwrap_or_else(|_| panic!("{code}"));
    let filter: F = Compiler::default()
        .with_funs(funs)
        .compile(modules)
        .unwrap_or_else(|_| panic!("{code}"));
    let times = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            // As the engine did: the input converted in, the first output converted out.
            let val: Val = serde_json::from_value(input.clone()).expect("JSON");
            let ctx = Ctx::<data::JustLut<Val>>::new(&filter.lut, Vars::new([]));
            let out = filter.id.run((ctx, val)).next();
            if let Some(Ok(v)) = out {
                let _: Value = serde_json::from_str(&v.to_string()).unwrap_or(Value::Null);
            }
            start.elapsed()
        })
        .collect();
    median(times)
}

fn metered(code: &str, input: &Value) -> (Duration, Duration) {
    let compiles = (0..50)
        .map(|_| {
            let start = Instant::now();
            Expression::compile(code).expect("compiles");
            start.elapsed()
        })
        .collect();
    let expr = Expression::compile(code).expect("compiles");
    let times = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            expr.evaluate(input).expect("runs");
            start.elapsed()
        })
        .collect();
    (median(times), median(compiles))
}

fn main() {
    let input = order();
    println!("| expression | jaq alone | metered | compile (with its trial run) |");
    println!("|---|---|---|---|");
    for code in [
        ".order.customer.tier == \"gold\"",
        "{id: .order.id, skus: [.order.items[] | .sku]}",
        "[.order.items[] | .qty * .price] | add",
        ".order.items | map(select(.qty > 2)) | length",
        "\"order \\(.order.id) for \\(.order.customer.name)\"",
    ] {
        let before = unmetered(code, &input);
        let (after, compile) = metered(code, &input);
        println!("| `{code}` | {before:.1?} | {after:.1?} | {compile:.1?} |");
    }
}
