//! Draws a definition's graph: `cargo run -p ratchet-workflow --example render FILE > out.svg`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: render FILE")?;
    let source = std::fs::read_to_string(path)?;
    let workflow = ratchet_workflow::Workflow::compile(&source).map_err(|e| e.to_string())?;
    print!("{}", workflow.render());
    Ok(())
}
