//! How long drawing a 200-step definition takes (layout, then SVG), as the median of 50 runs:
//! `cargo run --release -p ratchet-workflow --example layout_time [STEPS]`.

use std::time::{Duration, Instant};

#[path = "../tests/generate/mod.rs"]
mod generate;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let steps: usize = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 200,
    };
    let source = generate::generated(19, steps);
    let workflow = ratchet_workflow::Workflow::compile(&source).map_err(|e| e.to_string())?;
    let graph = workflow.graph();
    let (mut layouts, mut drawings) = (Vec::new(), Vec::new());
    for _ in 0..50 {
        let t = Instant::now();
        let layout = ratchet_graph::layout(&graph);
        layouts.push(t.elapsed());
        let t = Instant::now();
        let svg = ratchet_graph::svg(&layout);
        drawings.push(t.elapsed());
        std::hint::black_box(svg);
    }
    let layout = ratchet_graph::layout(&graph);
    println!(
        "{steps} steps: {} nodes, {} edges, {} crossings; layout median {:.2} ms, svg median {:.2} ms",
        layout.boxes.len(),
        layout.edges.len(),
        layout.crossings(),
        median(layouts).as_secs_f64() * 1e3,
        median(drawings).as_secs_f64() * 1e3
    );
    Ok(())
}
