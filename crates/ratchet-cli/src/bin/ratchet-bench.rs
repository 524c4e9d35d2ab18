//! `ratchet-bench`: the benchmark (run it as `ratchet bench`). A binary of its own because it
//! installs a counting allocator, for its bytes-per-operation figures, that the `ratchet`
//! binary (and so every worker) does without.

use clap::Parser;

#[path = "../logging.rs"]
mod logging;

/// The allocator the `ratchet` binary runs on, counting (for the bytes-per-operation figures).
#[global_allocator]
static ALLOCATOR: &ratchet_bench::CountingAllocator = &ratchet_bench::COUNTING_ALLOCATOR;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    logging::init();
    match ratchet_bench::main(ratchet_bench::Cli::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
