//! `ratchet-bench`: the benchmark (run it as `ratchet bench`). A binary of its own because it
//! installs a counting allocator, for its bytes-per-operation figures, that the `ratchet`
//! binary (and so every worker) does without.

use clap::Parser;

#[path = "../logging.rs"]
mod logging;

/// The system allocator, counting: a few uncontended atomic additions per allocation.
#[global_allocator]
static ALLOCATOR: &stats_alloc::StatsAlloc<std::alloc::System> = &stats_alloc::INSTRUMENTED_SYSTEM;

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
